"""Forms are bound to their kind, their opener and eligible reviewers; every refusal is audited."""

from __future__ import annotations

import copy
from typing import Any

from hitl.bot.views.controls import ACTION_MODIFY, ACTION_REJECT
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.requests import ProposeRequest
from tests.bot.conftest import Harness

REASON = {"hitl_reason": {"value": {"type": "plain_text_input", "value": "customer withdrew"}}}


async def _delete(h: Harness) -> Approval:
    p = await h.svc.propose(ProposeRequest("delete_customer", {"customer_id": "C-1042"}, session_id="ses_forms"))
    approval: Approval = p.approval
    assert approval is not None and approval.reason_required
    return approval


async def _refusals(h: Harness, approval_id: str) -> list[tuple[str, str, str]]:
    return [(e.actor, e.outcome, e.detail) for e in await h.svc.store.audit.entries(limit=500) if e.event == "refused"]


async def _open_reject(h: Harness, a: Approval, user: str = "U_SUPPORT1") -> tuple[str, dict[str, Any]]:
    await h.slack.click(user, copy.deepcopy(h.card_for(a.id)), ACTION_REJECT)
    view_id = list(h.state.views)[-1]
    return view_id, h.state.views[view_id]


async def test_a_reject_form_sent_as_feedback_is_refused_and_audited(harness: Harness) -> None:
    a = await _delete(harness)
    view_id, view = await _open_reject(harness, a)
    view["callback_id"] = "hitl_feedback_submit"  # forged: the signed metadata says this is a reject form
    reply = await harness.slack.submit("U_SUPPORT1", view_id, {})
    assert reply.status == 200 and reply.json()["response_action"] == "errors"
    assert (await harness.svc.store.approvals.get(a.id)) == a  # nothing changed
    assert ("U_SUPPORT1", "form_kind_mismatch", "reject form sent as feedback") in await _refusals(harness, a.id)


async def test_a_form_submitted_by_someone_else_is_refused_and_audited(harness: Harness) -> None:
    a = await _delete(harness)
    view_id, _ = await _open_reject(harness, a)
    reply = await harness.slack.submit("U_SUPPORT2", view_id, REASON)
    assert reply.json()["response_action"] == "errors"
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.PENDING
    assert ("U_SUPPORT2", "foreign_submitter", "reject form opened by U_SUPPORT1") in await _refusals(harness, a.id)


async def test_a_missing_required_reason_is_refused_and_audited(harness: Harness) -> None:
    a = await _delete(harness)
    view_id, _ = await _open_reject(harness, a)
    reply = await harness.slack.submit("U_SUPPORT1", view_id, {})
    assert reply.json()["response_action"] == "errors" and "reason" in str(reply.json()["errors"])
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.PENDING
    assert any(o == "invalid_input" and "needs a reason" in d for _, o, d in await _refusals(harness, a.id))
    ok = await harness.slack.submit("U_SUPPORT1", view_id, REASON)
    assert ok.status == 200 and ok.json() is None
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.REJECTED


async def test_strangers_get_no_forms_and_no_show(harness: Harness) -> None:
    a = await _delete(harness)
    views = len(harness.state.views)
    for action in (ACTION_MODIFY, ACTION_REJECT):
        await harness.slack.click("U_STRANGER", copy.deepcopy(harness.card_for(a.id)), action)
    assert len(harness.state.views) == views  # no form opened
    told = [m.text for m in harness.ephemeral("U_STRANGER")]
    assert len(told) == 2 and all("not a reviewer" in t for t in told)
    await harness.slack.command("U_STRANGER", "general", f"show {a.id}")
    assert "not a reviewer" in harness.ephemeral("U_STRANGER")[-1].text
    assert "C-1042" not in str(harness.ephemeral("U_STRANGER")[-1].blocks)
    await harness.slack.command("U_SUPPORT2", "general", f"show {a.id}")
    assert "C-1042" in str(harness.ephemeral("U_SUPPORT2")[-1].blocks)  # a reviewer sees it
    refusals = await _refusals(harness, a.id)
    assert [o for actor, o, _ in refusals if actor == "U_STRANGER"] == ["not_eligible"] * 3
