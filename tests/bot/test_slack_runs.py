"""``/hitl run`` on `hitl serve` (issue 68 item 2, the Slack source): a member of ``slack.run_role`` starts a workflow
registered under ``api.workflows`` with a signed slash command; the run acts for them, so its ``self`` step is theirs
alone to confirm. Anyone outside the role, an unknown workflow and bad variables are refused with a coded ephemeral
answer and nothing started."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.runs import RunState
from hitl.engine.errors import EngineError
from hitl.engine.storage.sqlite import SqliteStore
from hitl.sandbox.webapi import Message
from hitl.testing import FakeClock
from tests.bot.conftest import CONFIG, ROOT, Harness, start, stop, workspace
from tests.refund_config import write_refund_config

ALICE = "U_ALICE"
"""In the ops role, which may start runs from Slack; no reviewer of anything."""
BOB = "U_BOB"
"""In the ops role too: may start runs, but another's run is not his to confirm."""
SEND = "    send_email: {tier: self, role: support}\n"
RUN = "refund order_id=78291 amount=120"


def runs_config(tmp: Path, run_role: str = "ops") -> Path:
    """The refund example's hitl.yaml with the e-mail at tier self, an ops role that may start runs from Slack and
    the refund workflow registered by name."""
    text = CONFIG.read_text().replace("  tools:\n", "  tools:\n" + SEND, 1).replace(", send_email]", "]", 1)
    text = text.replace("roles:\n", f"roles:\n  ops: [{ALICE}, {BOB}]\n", 1)
    text = text.replace("slack:\n", f"slack:\n  run_role: {run_role}\n", 1)
    workflows = ["api:", "  workflows:", f"    refund: {ROOT / 'examples' / 'refund' / 'workflow.yaml'}"]
    return write_refund_config(tmp / "hitl.yaml", text + "\n".join(workflows) + "\n")


@pytest.fixture
async def h(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    state = workspace()
    for user, name in ((ALICE, "alice"), (BOB, "bob")):
        state.users[user] = {"name": name, "real_name": name.title(), "tz": "UTC"}
    made = await start(SqliteStore(tmp_path / "bot.db"), clock, state=state, config=runs_config(tmp_path))
    yield made
    await stop(made)


async def run(h: Harness, user: str, text: str) -> str:
    """``/hitl run text`` as ``user``, signed; the first ephemeral answer it got."""
    before = len(h.ephemeral(user))
    reply = await h.slack.command(user, "general", f"run {text}")
    assert reply.status == 200, reply
    await h.settle()
    told = h.ephemeral(user)[before:]
    assert told, "no answer"
    return told[0].text


async def nothing_started(h: Harness) -> None:
    assert await h.rt.store.runs.paused() == []
    assert h.cards() == [] and dm_cards(h) == []
    assert "run_started" not in [e.event for e in await h.rt.store.audit.entries()]


async def test_a_run_started_in_slack_asks_its_self_step_of_the_user_who_started_it(h: Harness) -> None:
    said = await run(h, ALICE, RUN)
    found = re.search(r"Started run `([^`]+)` of `refund-order`", said)
    assert found, said
    session = found.group(1)
    stored = await h.rt.store.runs.load(session)
    assert stored is not None and RunState.of(stored).on_behalf_of == ALICE
    started = [e for e in await h.rt.store.audit.entries() if e.event == "run_requested"]
    assert [(e.actor, e.outcome) for e in started] == [(ALICE, "ok")] and session in started[0].detail

    [refund] = h.cards()  # a refund is a reviewer's: asked of support, which alice is not
    await h.slack.click("U_SUPPORT1", refund, ACTION_APPROVE)
    await h.settle()
    assert await h.rt.lifecycle.process_jobs() == 1  # the run goes on, to the e-mail at tier self
    await h.settle()
    [card] = dm_cards(h)  # the DM with the person the run acts for
    assert "Only you confirm" in json.dumps(card.blocks)

    for other in ("U_SUPPORT1", BOB):  # a reviewer of the tool's role, and another who may start runs
        await h.slack.click(other, h.card_for(card_id(card)), ACTION_APPROVE)
        await h.settle()
        assert "not yours" in h.ephemeral(other)[-1].text
    email = await h.rt.store.approvals.get(card_id(card))
    assert (email.tool, email.on_behalf_of, str(email.status)) == ("send_email", ALICE, "pending")

    await h.slack.click(ALICE, h.card_for(email.id), ACTION_APPROVE)
    await h.settle()
    email = await h.rt.store.approvals.get(email.id)
    assert str(email.status) == "approved" and [d.reviewer for d in email.decisions] == [ALICE]
    assert await h.rt.lifecycle.process_jobs() == 1
    stored = await h.rt.store.runs.load(session)
    assert stored is not None and str(RunState.of(stored).status) == "completed"


def dm_cards(h: Harness) -> list[Message]:
    """The cards in alice's DM with the app (where a ``self`` step acting for her is asked)."""
    dm = "D" + ALICE[1:]
    return [m for m in h.state.messages if m.channel == dm and not m.ephemeral_to and not m.thread_ts]


def card_id(card: Message) -> str:
    found = re.search(r"apr_[A-Za-z0-9]+", card.text)
    assert found, card.text
    return found.group(0)


async def test_a_user_outside_the_run_role_is_refused_and_nothing_starts(h: Harness) -> None:
    said = await run(h, "U_SUPPORT1", RUN)
    assert "not_eligible" in said and "only the ops role may start runs" in said and "Nothing was started" in said, said
    await nothing_started(h)
    refused = [e for e in await h.rt.store.audit.entries() if e.event == "refused"]
    assert [(e.actor, e.outcome) for e in refused] == [("U_SUPPORT1", "not_eligible")]


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("payroll amount=1", "not_found", "registered: refund"),
        ("refund order_id=78291", "variables_invalid", "missing variable(s) amount"),
        ("refund order_id=78291 amount=120 colour=red", "variables_invalid", "unknown variable(s) colour"),
        ("refund order_id 78291", "variables_invalid", "is not key=value"),
        ("", "invalid_input", "name a workflow"),
    ],
)
async def test_an_unknown_workflow_or_bad_variables_are_refused_and_nothing_starts(
    h: Harness, text: str, code: str, words: str
) -> None:
    said = await run(h, ALICE, text)
    assert f"`{code}`" in said and words in said and "Nothing was started" in said, said
    await nothing_started(h)


def test_a_run_role_that_is_no_role_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="slack.run_role names 'opps'") as refused:
        load_config(runs_config(tmp_path, run_role="opps"))
    assert refused.value.code == "policy_invalid"


async def test_the_same_signed_request_delivered_again_starts_no_second_run(h: Harness) -> None:
    fields = {
        "team_id": h.state.team_id,
        "channel_id": "general",
        "user_id": ALICE,
        "user_name": "alice",
        "command": "/hitl",
        "text": f"run {RUN}",
        "response_url": h.state.new_response_url("general", ALICE),
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
    }
    for _ in range(2):  # a replay inside Slack's 300 s: signed again, and as valid
        assert (await h.slack.send("slash_commands", fields)).status == 200
        await h.settle()
    told = [m.text for m in h.ephemeral(ALICE)]
    assert len(told) == 3, told  # started; paused at the refund; the replay refused
    first, again = told[0], told[-1]
    assert (
        "Started run" in first
        and "paused" in told[1]
        and "already started run" in again
        and "Nothing was started" in again
    ), again
    assert len(await h.rt.store.runs.paused()) == 1 and len(h.cards()) == 1
    assert [e.event for e in await h.rt.store.audit.entries()].count("run_started") == 1


async def test_the_run_role_removed_from_hitl_yaml_refuses_the_next_command(h: Harness, tmp_path: Path) -> None:
    config = tmp_path / "hitl.yaml"  # read at each command, as POST /runs reads api.workflows: no restart needed
    config.write_text(config.read_text().replace("  run_role: ops\n", ""))
    said = await run(h, ALICE, RUN)
    assert "`not_eligible`" in said and "starting runs from Slack is off" in said, said
    await nothing_started(h)
