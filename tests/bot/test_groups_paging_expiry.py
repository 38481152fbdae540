"""User groups, /hitl pending paging, expiry through the bot, and typed modal inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import pytest
from pydantic import Field

from hitl.bot.listeners.commands import ACTION_PENDING_PAGE
from hitl.bot.outbound.reviewers import SlackReviewers
from hitl.bot.requests.payloads import ViewState
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.bot.views.modals import FormValues, modify_view, parse_modify
from hitl.engine.delegation.delegations import DelegatedReviewers
from hitl.engine.domain.models import Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.reviewers import Roles
from hitl.engine.domain.runs import RunStatus
from hitl.engine.execution.schema import signature_schema
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock, make_approval
from tests.bot.conftest import ROOT, Harness, start, stop, workspace

REFUND = ROOT / "examples" / "refund" / "workflow.yaml"
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def test_user_groups_grant_roles_and_are_cached(tmp_path: Path, clock: FakeClock) -> None:
    state = workspace()
    state.usergroups["S_SUPPORT"] = ["U_FIN3"]
    h = await start(SqliteStore(tmp_path / "g.db"), clock, state=state)
    try:
        # support is now granted through a Slack user group only
        cast(SlackReviewers, cast(DelegatedReviewers, h.rt.ctx.reviewers).inner).roles = Roles.from_config(
            {"support": ["S_SUPPORT"], "finance": ["U_FIN1", "U_FIN2"]}
        )
        p = await h.svc.propose(
            ProposeRequest("refund", {"order_id": "1", "customer_id": "C", "amount": 5}, session_id="g")
        )
        q = await h.svc.propose(
            ProposeRequest("refund", {"order_id": "2", "customer_id": "D", "amount": 6}, session_id="g")
        )
        assert p.approval is not None and q.approval is not None
        await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(p.approval.id)), ACTION_APPROVE)
        assert "not a reviewer" in h.ephemeral("U_SUPPORT1")[-1].text  # not in the group any more
        await h.slack.click("U_FIN3", copy.deepcopy(h.card_for(p.approval.id)), ACTION_APPROVE)
        await h.slack.click("U_FIN3", copy.deepcopy(h.card_for(q.approval.id)), ACTION_APPROVE)
        assert (await h.svc.store.approvals.get(p.approval.id)).status is Status.APPROVED
        assert (await h.svc.store.approvals.get(q.approval.id)).status is Status.APPROVED
        assert len(state.calls_to("usergroups.users.list")) == 1  # cached between clicks
    finally:
        await stop(h)


async def test_pending_pages_with_a_next_button(harness: Harness) -> None:
    ids = []
    for i in range(11):
        p = await harness.svc.propose(
            ProposeRequest("refund", {"order_id": str(i), "customer_id": f"C{i}", "amount": 5}, session_id=f"page{i}")
        )
        assert p.approval is not None
        ids.append(p.approval.id)
        harness.clock.advance(1)
    await harness.slack.command("U_SUPPORT1", "general", "pending")
    first = harness.ephemeral("U_SUPPORT1")[-1]
    text = json.dumps(first.blocks)
    assert all(i in text for i in ids[:8]) and not any(i in text for i in ids[8:])
    # Issue 63: a compact list, each approval acted on through its card (Open) or its id, no Approve unseen.
    entries = [b for b in first.blocks if str(b.get("block_id", "")).startswith("hitl_pending:")]
    assert len(entries) == 8 and all("|Open the card>" in b["text"]["text"] for b in entries)
    assert not any(e.get("action_id") == "hitl_approve" for b in first.blocks for e in b.get("elements", []))
    await harness.slack.click("U_SUPPORT1", first, ACTION_PENDING_PAGE)
    second = json.dumps(harness.ephemeral("U_SUPPORT1")[-1].blocks)
    assert all(i in second for i in ids[8:]) and not any(i in second for i in ids[:8])


async def test_expiry_applies_the_runs_fallback_and_late_clicks_are_told(harness: Harness) -> None:
    runner = harness.rt.runtime.contexts.for_workflow(load_workflow(REFUND)).runner
    r = await runner.start(load_workflow(REFUND), {"order_id": "78291", "amount": "30"}, config_path=str(CONFIG))
    await harness.settle()  # its card comes from the bot's worker
    assert r.approval is not None
    card = copy.deepcopy(harness.card_for(r.approval.id))
    harness.clock.advance(4 * 3600 + 1)
    await harness.rt.background.tick()
    await harness.rt.lifecycle.process_jobs()
    await harness.settle()
    assert (await runner.load(r.session_id)).status is RunStatus.EXPIRED
    a = await harness.svc.store.approvals.get(r.approval.id)
    assert a.status is Status.EXPIRED and a.decisions == ()
    await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
    assert "expired" in harness.ephemeral("U_SUPPORT1")[-1].text


def _ship(
    carrier: Literal["ups", "dhl"],
    weight: Annotated[int, Field(ge=1)],
    express: bool = False,
    note: Annotated[str, Field(json_schema_extra={"x-multiline": True})] = "",
) -> None:
    """A tool whose schema comes from its signature, as a workflow tool's does."""


def form(values: dict[str, Any]) -> FormValues:
    """Form values as the payload parser reads them from a submission."""
    return ViewState.model_validate({"values": values}).values


def test_modify_modal_has_typed_selects_and_checkboxes() -> None:
    schema = signature_schema("ship", _ship)
    a = make_approval(now=FakeClock().now(), tool="ship", args={"carrier": "dhl", "express": True, "weight": 3})
    view = modify_view(a, schema, "meta")
    elements = {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert elements["hitl_field:carrier"]["type"] == "static_select"
    assert elements["hitl_field:carrier"]["initial_option"]["value"] == "dhl"
    assert elements["hitl_field:express"]["type"] == "checkboxes" and elements["hitl_field:express"]["initial_options"]
    assert elements["hitl_field:weight"] == {
        "type": "number_input",
        "action_id": "value",
        "is_decimal_allowed": False,
        "initial_value": "3",
        "min_value": "1",
    }
    assert elements["hitl_field:note"]["multiline"] is True
    values: dict[str, Any] = {
        "hitl_field:carrier": {"value": {"type": "static_select", "selected_option": {"value": "ups"}}},
        "hitl_field:express": {"value": {"type": "checkboxes", "selected_options": []}},
        "hitl_field:weight": {"value": {"type": "number_input", "value": "7"}},
        "hitl_field:note": {"value": {"type": "plain_text_input", "value": None}},
    }
    args, errors = parse_modify(form(values), schema)
    assert errors == {} and args == {"carrier": "ups", "express": False, "weight": 7}
    values["hitl_field:carrier"]["value"]["selected_option"] = {"value": "fedex"}
    values["hitl_field:weight"]["value"]["value"] = "0"
    _, errors = parse_modify(form(values), schema)
    assert set(errors) == {"hitl_field:carrier", "hitl_field:weight"}


@pytest.mark.parametrize(
    "typed", ["٥٠", "５０", " 50 ", "5_0", "50.", ".5", "1e", "0x32", "+50", "050", "inf", "NaN", "5,0"]
)
def test_modify_modal_numbers_are_json_numbers_and_nothing_else(typed: str) -> None:
    """A number field takes the JSON number grammar only: digits other scripts write, spaces and underscores
    that Python's float() accepts never become a number nobody typed; the modal says so inline."""
    values = {"hitl_field:weight": {"value": {"type": "number_input", "value": typed}}}
    args, errors = parse_modify(form(values), signature_schema("ship", _ship))
    assert args == {} and "digits 0-9" in errors["hitl_field:weight"], (typed, args, errors)


@pytest.mark.parametrize(("typed", "read"), [("50", 50), ("-3", -3), ("12.5", 12.5), ("1e2", 100.0), ("0", 0)])
def test_modify_modal_numbers_keep_their_json_types(typed: str, read: float) -> None:
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}
    values = {"hitl_field:amount": {"value": {"type": "number_input", "value": typed}}}
    args, errors = parse_modify(form(values), schema)
    assert errors == {} and args == {"amount": read} and type(args["amount"]) is type(read)


def test_modify_modal_without_a_schema_edits_the_arguments_as_one_json_object() -> None:
    """Approvals stored before schemas were snapshotted: no form is guessed from the values."""
    a = make_approval(now=FakeClock().now(), tool="ship", args={"carrier": "dhl", "weight": 3})
    view = modify_view(a, None, "meta")
    [editor] = [b for b in view["blocks"] if b["type"] == "input"]
    assert json.loads(editor["element"]["initial_value"]) == {"carrier": "dhl", "weight": 3}
    cell = {editor["block_id"]: {"value": {"type": "plain_text_input", "value": '{"carrier": "ups", "weight": 4}'}}}
    assert parse_modify(form(cell), None) == ({"carrier": "ups", "weight": 4}, {})
    cell[editor["block_id"]]["value"]["value"] = "[1, 2]"
    args, errors = parse_modify(form(cell), None)
    assert args == {} and "JSON object" in errors[editor["block_id"]]
