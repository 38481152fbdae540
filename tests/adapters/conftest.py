"""The adapter conformance world on both stores: a backend, a fake clock, a SQLite ledger of effects."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.engine.ports import Store
from hitl.engine.storage import open_store
from hitl.engine.testing.conformance.agent_world import AgentWorld, Ledger
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url


@pytest.fixture(params=BACKENDS)
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AgentWorld]:
    url = fresh_store_url(request.param, request, tmp_path, tag="a")

    def open_one() -> Store:
        return open_store(url)

    made = AgentWorld(open_store=open_one, clock=FakeClock(), ledger=Ledger(tmp_path / "effects.db"))
    yield made
    for cleanup in made.cleanups:
        await cleanup()
    for store in made.opened:
        try:
            await store.close()
        except Exception:
            pass  # a store a test broke on purpose
