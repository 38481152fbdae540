"""`hitl serve` purges what its retention no longer keeps, from its background loop, on both stores: a finished run
and its approval after the records retention, the approval's audit chain after the audit retention, and the trail
still verifies. A click on a purged approval's old card is answered, not crashed on."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hitl.bot.settings import BotSettings
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.retention import DAY, PURGE_EVENT
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import InvalidInput, NotFound
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.serve import build_server
from hitl.testing import FakeClock
from tests.bot.conftest import ROOT, SECRET, Harness

REFUND = ROOT / "examples" / "refund" / "workflow.yaml"
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def test_serve_purges_after_the_retention_and_the_trail_still_verifies(harness: Harness) -> None:
    store = harness.svc.store
    runner = harness.rt.runtime.contexts.for_workflow(load_workflow(REFUND)).runner
    r = await runner.start(load_workflow(REFUND), {"order_id": "78291", "amount": "120"}, config_path=str(CONFIG))
    await harness.settle()  # its card comes from the bot's worker
    assert r.status is RunStatus.PAUSED and r.approval is not None
    card = copy.deepcopy(harness.card_for(r.approval.id))
    await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
    await harness.rt.lifecycle.process_jobs()
    await harness.settle()
    assert (await runner.load(r.session_id)).status is RunStatus.COMPLETED
    chain = [e.event for e in await store.audit.entries(approval_id=r.approval.id)]

    harness.clock.advance(29 * DAY)
    await harness.rt.background.tick()
    assert (await store.approvals.get(r.approval.id)).id == r.approval.id  # inside the retention (30 days)

    harness.clock.advance(2 * DAY)
    await harness.rt.background.tick()
    with pytest.raises(NotFound):
        await store.approvals.get(r.approval.id)
    assert await store.runs.load(r.session_id) is None
    assert await store.messages.get(r.approval.id) is None
    assert [e.event for e in await store.audit.entries(approval_id=r.approval.id)] == chain
    purge = [e for e in await store.audit.entries() if e.event == PURGE_EVENT]
    assert len(purge) == 1 and purge[0].actor.startswith("retention:")
    assert json.loads(purge[0].detail)["approvals"] == 1
    assert (await store.audit.verify())[1] is None

    late = await harness.slack.click("U_SUPPORT2", card, ACTION_APPROVE)  # the card outlived its approval
    assert late.status == 200
    await harness.settle()
    said = harness.ephemeral("U_SUPPORT2")
    assert said and "No such approval" in said[-1].text, [m.text for m in said]

    harness.clock.advance(400 * DAY)
    await harness.rt.background.tick()
    assert await store.audit.entries(approval_id=r.approval.id) == []
    assert (await store.audit.verify())[1] is None


async def test_serve_refuses_to_start_on_a_retention_it_cannot_keep(tmp_path: Path) -> None:
    settings = BotSettings(
        slack_bot_token="xoxb-test",
        slack_signing_secret=SECRET,
        hitl_config=str(CONFIG),
        hitl_retention="90d",
        hitl_audit_retention="30d",
    )
    store = SqliteStore(tmp_path / "s.db")
    try:
        with pytest.raises(InvalidInput, match="at least the records retention"):
            await build_server(settings, store=store, clock=FakeClock())
    finally:
        await store.close()
