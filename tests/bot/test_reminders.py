"""A reminder comes once, at ``expires_at - min(reminder_before, timeout / 4)``, in the card's thread, calling by
name each person who may still decide (not the requester, not a voter): a ``timeout: 10m`` approval with the default
``reminder_before`` (10 minutes) is reminded 2.5 minutes before it expires, not moments after its card. Another
sweep, or ``hitl serve`` restarted on the same store, reminds nobody again. Over signed Slack requests, the fake
Slack Web API and every store, on the injectable clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.storage import open_store
from hitl.sandbox.webapi import Message
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.bot import payments
from tests.bot.conftest import Harness, start, stop
from tests.bot.payments import pay

CONFIG = payments.requested_by_riley(
    support="[U_SUPPORT1, U_SUPPORT2, U_SUPPORT3]", finance="[U_FIN1, U_FIN2]"
) + payments.tool("pay", tier="approve", role="support", quorum=2, timeout="10m")


@pytest.fixture(params=BACKENDS)
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    (tmp_path / "hitl.yaml").write_text(CONFIG)
    return fresh_store_url(request.param, request, tmp_path, tag="remind")


def _reminders(h: Harness, card: Message) -> list[Message]:
    return [m for m in h.state.messages if m.thread_ts == card.ts and m.channel == card.channel]


async def _sweep(h: Harness) -> None:
    await h.rt.ctx.notifier.sweep()
    await h.settle()


async def test_a_ten_minute_approval_is_reminded_once_a_quarter_of_its_timeout_before_it_expires(
    store_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    h = await start(open_store(store_url), clock, config=tmp_path / "hitl.yaml")
    try:
        await _remind_once(h)
    finally:
        await stop(h)
    # hitl serve restarted on the same store, the same workspace: nobody is reminded again
    again = await start(open_store(store_url), clock, state=h.state, config=tmp_path / "hitl.yaml")
    try:
        await _sweep(again)
        again.clock.advance(60)
        await _sweep(again)
        [card] = again.cards()
        assert len(_reminders(again, card)) == 1
    finally:
        await stop(again)


async def _remind_once(h: Harness) -> None:
    a = await pay(h, 40, "V-1")
    card = h.card_for(a.id)
    assert a.expires_at - a.created_at == 600
    assert (await h.slack.click("U_SUPPORT1", card, ACTION_APPROVE)).status == 200  # one vote of two
    await h.settle()

    h.clock.advance(2)
    await _sweep(h)
    assert _reminders(h, card) == []  # not moments after the card
    h.clock.advance(600 - 150 - 2 - 1)  # 151 s left: min(600, 600 / 4) = 150 s before expiry is not yet
    await _sweep(h)
    assert _reminders(h, card) == []

    h.clock.advance(1)  # 150 s left
    await _sweep(h)
    await _sweep(h)  # a second sweep (or replica) reminds nobody again
    [reminder] = _reminders(h, card)
    assert "expires" in reminder.text and "(1 of 2)" in reminder.text
    assert reminder.text.startswith("<@U_SUPPORT2> <@U_SUPPORT3>:")  # each who may still decide, once
    assert "U_SUPPORT1" not in reminder.text and "riley" not in reminder.text  # not the voter, not the requester
