"""Open a store from a URL: ``sqlite:///path.db`` (default) or ``redis://host:port/db``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

from hitl.engine.errors import ErrorCode, InvalidInput
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
    ``redis://[:password@]host:port/db``, optionally ``?prefix=name`` (default ``hitl``).
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
    raise InvalidInput(
        f"unsupported store URL {url!r}; use sqlite:///path.db or redis://host:port/0",
        code=ErrorCode.INVALID_INPUT,
    )
