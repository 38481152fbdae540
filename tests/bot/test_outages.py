"""A store outage while `hitl serve` runs: said once when it starts (WARNING, with the real retry interval, no
traceback), once when it ends (INFO), counted in /metrics; never a traceback per round."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import cast

import pytest

from hitl.engine.ports import Store
from hitl.engine.process.tasks import Outages
from hitl.engine.runtime.background import Background
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.agent_world import BreakableStore
from hitl.testing import FakeClock
from tests.bot.conftest import Harness, start, stop
from tests.waiting import eventually


async def test_a_store_outage_is_logged_once_each_way_and_counted(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    store = BreakableStore(SqliteStore(tmp_path / "hitl.db"))
    h = await start(cast(Store, store), clock)
    rounds = 0
    tick = h.rt.lifecycle.tick

    async def counted() -> None:
        nonlocal rounds
        rounds += 1
        await tick()

    monkeypatch.setattr(h.rt.lifecycle, "tick", counted)
    background = Background(h.rt.lifecycle, interval=0.01)  # `hitl serve`'s loop, at a test's pace
    h.rt.ctx.metrics.watch(background.outages)

    async def more_rounds(n: int) -> None:
        until = rounds + n
        await eventually(lambda: rounds >= until, what=f"{n} more rounds", interval=0.005)

    try:
        with caplog.at_level(logging.INFO):
            background.start()
            store.break_()
            await more_rounds(12)
            async with h.http.get(f"{h.bot_url}/metrics") as resp:
                during = await resp.text()
            store.broken = False
            await more_rounds(3)
            await background.stop()
    finally:
        await stop(h)
    mine = [r for r in caplog.records if r.name == "hitl.engine.process.tasks"]
    assert [(r.levelname, "every 0.01 s" in r.getMessage()) for r in mine if r.levelno >= logging.WARNING] == [
        ("WARNING", True)
    ], [r.getMessage() for r in mine]
    assert not any(r.exc_info for r in mine)
    assert [r.levelname for r in mine if "works again after" in r.getMessage()] == ["INFO"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert 'hitl_background_up{loop="hitl-background"} 0.0' in during
    assert 'hitl_background_outages_total{loop="hitl-background"} 1.0' in during
    assert background.outages.started == 1 and not background.outages.down


def test_outage_tracker_gives_a_bug_its_traceback_once(caplog: pytest.LogCaptureFixture) -> None:
    o = Outages("the sweep", every=0.5)
    with caplog.at_level(logging.INFO, logger="hitl.engine.process.tasks"):
        for _ in range(5):
            o.failed(KeyError("surprise"))
        o.ok()
        o.ok()
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].exc_info is not None and "every 0.5 s" in warned[0].getMessage()
    assert [r.getMessage().split(" after")[0] for r in caplog.records if r.levelno == logging.INFO] == [
        "the sweep works again"
    ]
    assert o.started == 1


async def test_a_stopping_replica_waits_for_slack_follow_ups_only_so_long(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A follow-up to Slack that never completes (Slack stopped answering) does not hold a stopping replica: the
    drain ends, it says so, and the Slack side is closed anyway (its store is closed after, by the runtime)."""
    stuck = asyncio.Event()

    async def follow_up() -> None:  # a follow-up message whose request never returns
        await stuck.wait()

    harness.rt.bot.ctx.later(follow_up())
    with caplog.at_level(logging.WARNING, logger="hitl.bot.app"):
        await harness.rt.bot.close(drain=0.2)  # it returns although the follow-up never will
    assert "1 Slack follow-up(s) unfinished after 0.2 s" in caplog.text
    assert harness.rt.bot.side.http.closed  # closed despite the follow-up
    stuck.set()  # let it end, so the harness stops as usual
