"""Open a store from a URL: ``sqlite:///path.db`` (default), ``redis://host:port/db`` or ``postgresql://...``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode, urlparse

from hitl.engine.errors import ErrorCode, InvalidInput

if TYPE_CHECKING:  # the port loads the decision rules; what reads a store's URL (a CLI's settings) needs none
    from hitl.engine.ports import Store

__all__ = ["DEFAULT_STORE_URL", "open_store", "sqlite_path"]

DEFAULT_STORE_URL = "sqlite:///.hitl/hitl.db"


def sqlite_path(url: str | None) -> Path | None:
    """The database file a ``sqlite://`` store URL names (None for any other store)."""
    parsed = urlparse(url or DEFAULT_STORE_URL)
    if parsed.scheme != "sqlite":
        return None
    path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    return Path(path) if path else None


def open_store(url: str | None = None) -> Store:
    """Build the store named by ``url`` (``HITL_STORE``).

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, optionally ``?synchronous=full``;
    ``redis://[:password@]host:port/db``, optionally ``?prefix=name`` (default ``hitl``);
    ``postgresql://user:password@host:port/database``, optionally ``?schema=name`` (default ``public``; other
    parameters go to the driver as libpq would take them, ``sslmode=require`` say).
    """
    url = url or DEFAULT_STORE_URL
    parsed = urlparse(url)
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    if parsed.scheme == "sqlite":
        from hitl.engine.storage.sqlite import SqliteStore

        path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
        if not path:
            raise InvalidInput(f"{url!r} names no file; write sqlite:///path/to/hitl.db", code=ErrorCode.INVALID_INPUT)
        return SqliteStore(Path(path), synchronous=query.get("synchronous", "normal"))
    if parsed.scheme in ("redis", "rediss", "unix"):
        from hitl.engine.storage.redis import RedisStore, connect

        return RedisStore(connect(url.split("?", 1)[0]), prefix=query.get("prefix", "hitl"))
    if parsed.scheme in ("postgresql", "postgres"):
        try:
            from hitl.engine.storage.postgres import PostgresStore
        except ImportError:
            raise InvalidInput(
                "the PostgreSQL store needs the postgres extra: pip install 'hitl-gate[postgres]'",
                code=ErrorCode.INVALID_INPUT,
            ) from None
        rest = urlencode({k: v for k, v in query.items() if k != "schema"})
        dsn = parsed._replace(query=rest).geturl()
        return PostgresStore(dsn, schema=query.get("schema", "public"))
    raise InvalidInput(
        f"unsupported store URL {url!r}; use sqlite:///path.db, redis://host:port/0 or postgresql://host/db",
        code=ErrorCode.INVALID_INPUT,
    )
