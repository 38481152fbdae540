"""What the service tests share: a store opened again as another replica (or after a restart) would open it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from hitl.engine.ports import Store
from hitl.engine.storage import open_store
from tests.backends import BACKENDS, fresh_store_url


@pytest.fixture(params=BACKENDS)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[], Store]]:
    """Opens the same fresh store again each time it is called (another process, or the same after a restart);
    every one opened is closed after the test."""
    opened: list[Store] = []
    url = fresh_store_url(request.param, request, tmp_path, tag="svc")

    def open_one() -> Store:
        store = open_store(url)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()
