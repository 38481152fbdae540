"""A store written outside hitl (``examples/stores/traced_store.py``, public imports
only) passes every store conformance suite, as the documentation's "A store of your own"
page says yours can (the page includes this file: it fits 88 columns)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from examples.stores.traced_store import TracedStore
from hitl import open_store
from hitl.testing.conformance import STORE_SUITES


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[TracedStore]:
    made = TracedStore(open_store(f"sqlite:///{tmp_path / 'hitl.db'}"))
    yield made
    await made.close()


@pytest.fixture
async def dead_store(tmp_path: Path) -> AsyncIterator[TracedStore]:
    # a database path that is a directory: nothing can answer
    (tmp_path / "dir.db").mkdir()
    made = TracedStore(open_store(f"sqlite:///{tmp_path / 'dir.db'}"))
    yield made
    await made.close()


# One test class per suite, as a user's module would declare them.
for _suite in STORE_SUITES:
    globals()[f"Test{_suite.__name__.removesuffix('Conformance')}"] = type(
        f"Test{_suite.__name__.removesuffix('Conformance')}", (_suite,), {}
    )


def test_the_store_timed_what_the_suites_called(tmp_path: Path) -> None:
    import asyncio

    async def run() -> TracedStore:
        store = TracedStore(open_store(f"sqlite:///{tmp_path / 'hitl.db'}"))
        await store.halts.active()
        await store.close()
        return store

    traced = asyncio.run(run())
    assert list(traced.timings) == ["halts.active"]
    assert len(traced.timings["halts.active"]) == 1
