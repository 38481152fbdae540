"""Every store backend, for the per-port conformance suites: ``store`` runs each suite on SQLite and Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hitl.engine.ports import Store
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.redis import RedisStore, connect
from hitl.engine.storage.sqlite import SqliteStore
from tests.ports import free_port


@pytest.fixture(params=["sqlite", "redis", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    made: Store
    if request.param == "sqlite":
        made = SqliteStore(tmp_path / "hitl.db")
    elif request.param == "redis":
        made = RedisStore(connect(request.getfixturevalue("redis_url")), prefix=f"t{uuid.uuid4().hex[:10]}")
    else:  # a schema of its own in the session's server: tests never see each other's rows
        made = PostgresStore(request.getfixturevalue("postgres_url"), schema=f"t{uuid.uuid4().hex[:10]}")
    yield made
    await made.close()


@pytest.fixture(params=["sqlite", "redis", "postgres"])
async def dead_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A backend that cannot answer: a database path that is a directory, a Redis or PostgreSQL port nothing
    listens on."""
    made: Store
    if request.param == "sqlite":
        (tmp_path / "dir.db").mkdir()
        made = SqliteStore(tmp_path / "dir.db")
    elif request.param == "postgres":
        made = PostgresStore(f"postgresql://hitl@127.0.0.1:{free_port()}/postgres?connect_timeout=1")
    else:
        made = RedisStore(connect(f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.5), prefix="dead")
    yield made
    await made.close()


@dataclass(frozen=True)
class StoreUrl:
    """A store as the CLI and other processes reach it: its ``HITL_STORE`` URL."""

    backend: str
    url: str
    path: Path
    """The SQLite file (unused on Redis)."""


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUrl:
    """A fresh store on each backend, by URL: a new SQLite file, or a Redis key prefix of its own."""
    path = tmp_path / "store.db"
    if request.param == "sqlite":
        return StoreUrl("sqlite", f"sqlite:///{path}", path)
    return StoreUrl("redis", f"{request.getfixturevalue('redis_url')}?prefix=t{uuid.uuid4().hex[:10]}", path)


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A SQL store: a new SQLite file, or a schema of its own in the session's PostgreSQL."""
    made: Store
    if request.param == "sqlite":
        made = SqliteStore(tmp_path / "hitl.db")
    else:
        made = PostgresStore(request.getfixturevalue("postgres_url"), schema=f"t{uuid.uuid4().hex[:10]}")
    yield made
    await made.close()
