"""The adapter conformance world on both stores: a backend, a fake clock, a SQLite ledger of effects."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.engine.ports import Store
from hitl.engine.storage.redis import RedisStore, connect
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.adapters import AgentWorld, Ledger
from hitl.testing import FakeClock


@pytest.fixture(autouse=True, scope="session")
def no_tracing_off_the_machine() -> None:
    """The OpenAI Agents SDK exports traces to OpenAI by default; tests never send traffic off the machine."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)


@pytest.fixture(params=["sqlite", "redis"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AgentWorld]:
    if request.param == "sqlite":
        db = tmp_path / "hitl.db"

        def open_store() -> Store:
            return SqliteStore(db)
    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"a{uuid.uuid4().hex[:10]}"

        def open_store() -> Store:
            return RedisStore(connect(url), prefix=prefix)

    made = AgentWorld(open_store=open_store, clock=FakeClock(), ledger=Ledger(tmp_path / "effects.db"))
    yield made
    for cleanup in made.cleanups:
        await cleanup()
    for store in made.opened:
        try:
            await store.close()
        except Exception:
            pass  # a store a test broke on purpose
