"""The SQLite store runs short transactions on the event loop, and never blocks the loop on another process's lock.

Another process holds the write lock (a real ``sqlite3`` subprocess); a write through the store waits for it on the
worker thread while the loop keeps running, then commits. A waiter wakes at once on a change made in this process,
and within a poll on one made by another process.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hitl.engine.domain.models import Status
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.storage.sqlite.connection import POLL
from hitl.engine.testing.conformance import helpers
from hitl.testing import FakeClock, make_approval

_HOLD = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
"""

_DECIDE = """
import asyncio, sys
from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import DecisionKind, Reviewer
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock

async def go():
    store = SqliteStore(sys.argv[1])
    a = await store.approvals.get(sys.argv[2])
    cmd = DecideCommand(approval_id=a.id, reviewer=Reviewer(id="U_OTHER", roles=frozenset({"support"})),
                        kind=DecisionKind.APPROVE, expected_version=a.version, expected_hash=a.action_hash)
    await store.approvals.decide(cmd, now=FakeClock().now())
    await store.close()

asyncio.run(go())
"""


async def test_a_write_waits_for_another_process_lock_off_the_loop(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    store = SqliteStore(db)
    clock = FakeClock()
    await store.ping()  # created, and the loop's connection open
    with subprocess.Popen([sys.executable, "-c", _HOLD, str(db), "0.6"], stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None
        assert await asyncio.to_thread(holder.stdout.readline) == "locked\n"
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(ticker())
        started = time.monotonic()
        stored, created = await store.approvals.create(make_approval(now=clock.now()))
        waited = time.monotonic() - started
        beat.cancel()
        assert created
        assert waited >= 0.3  # it really waited for the other process's lock...
        assert ticks >= 10  # ...and the loop ran on meanwhile (inline it would have frozen, or failed at once)
        assert (await store.approvals.get(stored.id)).id == stored.id
        holder.wait(timeout=10)
    await store.close()


async def test_a_waiter_wakes_at_once_on_a_change_made_in_this_process(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "h.db")
    clock = FakeClock()
    a, _ = await store.approvals.create(make_approval(now=clock.now()))
    waiter = asyncio.create_task(store.approvals.wait_changed(a.id, after_version=a.version, timeout=30))
    await asyncio.sleep(0)
    cmd = helpers.cmd(a, "U_X")
    await store.approvals.decide(cmd, now=clock.now())
    # Woken by the in-process signal, not the poll: done before any poll interval could pass.
    done, _ = await asyncio.wait({waiter}, timeout=POLL / 2)
    assert waiter in done
    assert waiter.result().status is Status.APPROVED
    await store.close()


async def test_a_waiter_wakes_within_polls_on_a_change_another_process_made(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    store = SqliteStore(db)
    clock = FakeClock()
    a, _ = await store.approvals.create(make_approval(now=clock.now()))
    # A day's timeout: a waiter that returns within the test was woken by its poll, not by the timeout.
    waiter = asyncio.create_task(store.approvals.wait_changed(a.id, after_version=a.version, timeout=86400))
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _DECIDE, str(db), a.id)
    assert await proc.wait() == 0
    got = await asyncio.wait_for(waiter, timeout=30)
    assert got.status is Status.APPROVED
    await store.close()


async def test_the_thread_only_mode_gives_the_same_answers(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "h.db", inline=False)
    clock = FakeClock()
    a, created = await store.approvals.create(make_approval(now=clock.now()))
    assert created
    assert (await store.approvals.get(a.id)).version == a.version
    await store.close()


async def test_a_commit_between_the_waiters_read_and_the_first_poll_still_wakes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race behind an agent left waiting on an approval that was already decided: another connection commits
    after the waiter read the row but before the poll's first look at ``data_version``. The commit is made at that
    exact instant (just before the first look), so the test does not depend on scheduling."""
    db = tmp_path / "h.db"
    store, other = SqliteStore(db), SqliteStore(db)
    clock = FakeClock()
    a, _ = await store.approvals.create(make_approval(now=clock.now()))
    cmd = helpers.cmd(a, "U_X")
    looks = 0
    first_look = store.db._data_version

    async def commit_before_the_first_look() -> int:
        nonlocal looks
        looks += 1
        if looks == 1:
            await other.approvals.decide(cmd, now=clock.now())
        return await first_look()

    monkeypatch.setattr(store.db, "_data_version", commit_before_the_first_look)
    got = await asyncio.wait_for(store.approvals.wait_changed(a.id, after_version=a.version, timeout=60), 10)
    assert got.status is Status.APPROVED and looks >= 1
    await other.close()
    await store.close()
