"""A fresh store of each kind, for the benchmarks that compare them: a new SQLite file, a Redis key prefix of its
own, or a PostgreSQL schema of its own, on servers started for the run (the same PostgreSQL the tests start)."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import redis_server

from hitl.engine.ports import Store
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.redis import RedisStore, connect
from hitl.engine.storage.sqlite import SqliteStore
from tests.postgres_server import running_postgres

__all__ = ["every_store"]


@contextlib.contextmanager
def every_store(tag: str) -> Iterator[dict[str, Callable[[], Store]]]:
    """By name (SQLite, Redis, PostgreSQL): a maker of a new, empty store; ``tag`` starts its prefix or schema."""
    with tempfile.TemporaryDirectory() as tmp, redis_server() as redis_url, running_postgres() as pg_url:
        yield {
            "SQLite": lambda: SqliteStore(Path(tmp) / f"{uuid.uuid4().hex}.db"),
            "Redis": lambda: RedisStore(connect(redis_url), prefix=f"{tag}{uuid.uuid4().hex[:8]}"),
            "PostgreSQL": lambda: PostgresStore(pg_url, schema=f"{tag}{uuid.uuid4().hex[:8]}"),
        }
