"""The heartbeat behind run ownership and effect claims: a block that outlives a renewal period is renewed every
period for as long as it runs; one that ends first costs no renewal and leaves nothing running; a lost lease stops
the heartbeat and says so."""

from __future__ import annotations

import asyncio
import logging

import pytest

from hitl.engine.execution.leases import kept_alive
from tests.waiting import eventually


def lease_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("hitl-lease:")]


class Renewals:
    """A lease's ``renew``: counts its calls and answers ``kept`` (False: another worker took the lease)."""

    def __init__(self, *, kept: bool = True) -> None:
        self.kept = kept
        self.calls = 0

    async def __call__(self) -> bool:
        self.calls += 1
        return self.kept


async def test_a_block_that_ends_before_the_first_renewal_renews_nothing_and_leaves_nothing() -> None:
    renew = Renewals()
    async with kept_alive(renew, every=30.0, what="a quick effect"):
        assert not lease_tasks()  # no heartbeat task while none is due
    assert renew.calls == 0
    assert not lease_tasks()


async def test_a_long_block_is_renewed_every_period_until_it_ends() -> None:
    renew = Renewals()
    async with kept_alive(renew, every=0.01, what="a slow effect"):
        await eventually(lambda: renew.calls >= 3, what="three renewals while the block runs", interval=0.005)
        assert len(lease_tasks()) == 1
    stopped_at = renew.calls
    assert not lease_tasks()  # the heartbeat ended with the block
    await asyncio.sleep(0.05)
    assert renew.calls == stopped_at  # and renews nothing after it


async def test_a_lost_lease_stops_the_heartbeat_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    renew = Renewals(kept=False)  # another worker took it over
    with caplog.at_level(logging.WARNING, logger="hitl.engine.execution.leases"):
        async with kept_alive(renew, every=0.01, what="the claim on k"):
            await eventually(lambda: "lost the claim on k" in caplog.text, what="the loss logged", interval=0.005)
            await eventually(lambda: not lease_tasks(), what="the heartbeat ended", interval=0.005)
    assert renew.calls == 1
