"""One view of an approval on every surface: the Slack card, `/hitl show`, the Home tab, `hitl show` (text and
JSON), the API and webhook events draw the same headline, labelled values, reasons and outcome line, in every state
and after every change (the sandbox's browser rendering is checked in tests/sandbox/test_browser.py)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from hitl.api.models import ApprovalView
from hitl.bot.views.blocks import card
from hitl.bot.views.home import Waiting, home_view
from hitl.cli.output import Out, approval_json
from hitl.engine.config.hitl_yaml import HitlConfig, parse_config
from hitl.engine.domain.edits import CHANGED
from hitl.engine.domain.models import Approval, ApprovalKind, Decision, DecisionKind, Status
from hitl.engine.domain.presentation import RENDERER, Presentation, present
from hitl.engine.subscribers.events import approval_data
from hitl.testing import FakeClock, make_approval

NOW = FakeClock().now()
CONFIG = parse_config(
    """
roles: {support: [U_S1, U_S2], finance: [U_F1, U_F2]}
policy:
  tools:
    refund:
      tier: approve
      role: support
      reason: Refunds send money back to the customer.
      summary: "Refund {{ args.amount | money }} to {{ args.customer_id }}"
      schema:
        type: object
        properties:
          customer_id: {type: string, title: Customer}
          amount: {type: number, x-currency: EUR, description: Gross amount}
"""
)
ARGS = {"customer_id": "C-1", "amount": 49}


def _vote(kind: DecisionKind, *, args: dict[str, Any] | None = None, reason: str | None = None) -> Decision:
    return Decision(reviewer="U_S1", kind=kind, at=NOW, version=1, via="slack", args=args, reason=reason)


def _base() -> Approval:
    a = make_approval(now=NOW, args=dict(ARGS))
    return a.model_copy(update={"summary": CONFIG.policy.summarize("refund", a.args), "why": ("Refunds send money.",)})


def states() -> dict[str, Approval]:
    base = _base()
    edited = {"customer_id": "C-1", "amount": 40}
    return {
        "pending": base,
        "approved": base.model_copy(update={"status": Status.APPROVED, "decisions": (_vote(DecisionKind.APPROVE),)}),
        "modified": base.model_copy(
            update={
                "status": Status.EXECUTED,
                "approved_args": edited,
                "decisions": (_vote(DecisionKind.MODIFY, args=edited),),
            }
        ),
        "superseded": base.model_copy(
            update={
                "status": Status.SUPERSEDED,
                "superseded_by": "apr_0000000000",
                "decisions": (_vote(DecisionKind.MODIFY, args={"customer_id": "C-1", "amount": 900}),),
            }
        ),
        "replacement": base.model_copy(
            update={"args": {"customer_id": "C-1", "amount": 900}, "metadata": {CHANGED: {"amount": [49, 900]}}}
        ),
        "rejected": base.model_copy(
            update={"status": Status.REJECTED, "reason": "wrong customer", "decisions": (_vote(DecisionKind.REJECT),)}
        ),
        "expired": base.model_copy(update={"status": Status.EXPIRED}),
        "in_doubt": base.model_copy(
            update={"tool": "doubt:refund", "kind": ApprovalKind.DOUBT, "args": {"tool": "refund", "args": ARGS}}
        ),
    }


def _card_story(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a card shows, read back from its blocks."""
    heading = blocks[0]["text"]["text"]
    why = next((b["text"]["text"] for b in blocks if "Why it needs review" in str(b.get("text", {}))), "")
    reasons = [line.removeprefix("• ") for line in why.split("\n")[1:]]
    [args] = [b for b in blocks if str(b.get("block_id", "")).startswith("hitl_args:")]
    fields: list[tuple[str, str]] = []
    parts = args["elements"]
    for i, part in enumerate(parts):
        if part["type"] == "rich_text_preformatted":
            line = parts[i - 1]["elements"]
            label = line[0]["text"] if line[0].get("style", {}).get("bold") else line[0]["text"]
            fields.append((label, "".join(run["text"] for run in part["elements"])))
    ended = [b["text"]["text"] for b in blocks if str(b.get("block_id", "")).startswith("hitl_outcome:")]
    outcome = ended[0].split("\n")[1] if ended else None
    if outcome is not None:  # the decider is a mention, with when and via; their reason sits in a box below
        outcome = re.sub(r" <!date\^[^>]*> via \S+$", "", re.sub(r"<@([A-Z0-9_]+)>", r"\1", outcome))
        boxes = [b for b in blocks if str(b.get("block_id", "")).startswith(("hitl_reason:", "hitl_note:"))]
        if boxes and not outcome.endswith(" approved"):
            outcome += ": " + boxes[0]["elements"][0]["elements"][0]["text"]
    return {"heading": heading, "reasons": reasons, "fields": fields, "outcome": outcome}


def _cli_story(view: ApprovalView) -> dict[str, Any]:
    """What `hitl show` prints, read back from its text."""
    out = Out(as_json=False)
    buffer = io.StringIO()
    out.console = Console(file=buffer, width=300, highlight=False, soft_wrap=True)
    out.approval(view)
    rows = [line.rstrip() for line in buffer.getvalue().splitlines()]
    width = rows[0].index(view.id)  # the key column's width: a continuation row leaves it blank
    cells: list[tuple[str, str]] = []
    for row in rows:
        key, value = row[:width].rstrip(), row[width:]
        if key or not cells:
            cells.append((key, value))
        else:
            cells[-1] = (cells[-1][0], f"{cells[-1][1]}\n{value}")
    story: dict[str, Any] = {"heading": "", "reasons": [], "fields": [], "outcome": None}
    for key, value in cells:
        if key == "about":
            story["heading"] = value
        elif key == "outcome":
            story["outcome"] = value
        elif key == "why":
            story["reasons"].append(value)
        elif key.startswith("  "):
            story["fields"].append((key.strip().split(" (")[0], value.rsplit("  (", 1)[0]))
    return story


def _canonical_story(view: dict[str, Any]) -> dict[str, Any]:
    """What a surface that carries the view as data tells (the API, `hitl show --json`, a webhook's event)."""
    return {
        "heading": view["heading"],
        "reasons": view["reasons"],
        "fields": [(f["label"], f["text"]) for f in view["fields"]],
        "outcome": view["outcome"],
    }


def _expected(view: Presentation) -> dict[str, Any]:
    return {
        "heading": view.heading,
        "reasons": list(view.reasons),
        "fields": [(f.label, f.value.text) for f in view.fields],
        "outcome": view.outcome,
    }


@pytest.mark.parametrize("state", list(states()))
def test_every_surface_tells_the_same_story(state: str) -> None:
    a = states()[state]
    view = CONFIG.present(a)
    expected = _expected(view)
    declared = CONFIG.declared_schema(a.tool)
    assert _card_story(card(a, now=NOW, view=view, declared=declared)) == expected  # the Slack card
    assert _card_story(card(a, now=NOW, view=view, declared=declared, detail=True)) == expected  # /hitl show
    api = ApprovalView.of(a, view)
    assert api.view == view.canonical() and api.view_digest == view.digest()
    assert _canonical_story(api.model_dump(mode="json")["view"]) == expected  # the API's approval view
    assert _canonical_story(approval_json(api)["view"]) == expected  # hitl show --json
    assert _cli_story(api) == expected  # hitl show
    event = approval_data(a, view)  # a webhook's event
    assert _canonical_story(event["view"]) == expected and event["view_digest"] == view.digest()
    home = str(home_view("U_S2", waiting=[Waiting(a, None)], more_waiting=False, decided=[], grants=[], now=NOW,
                         view_of=CONFIG.present))  # fmt: skip
    assert view.headline in home


def test_a_modify_keeps_the_sentence_with_the_values_that_run() -> None:
    modified = CONFIG.present(states()["modified"])
    assert modified.heading == "Approved and done: Refund EUR 40.00 to “C-1”"
    assert [(c.name, c.before.text, c.after.text) for c in modified.changes] == [("amount", "49", "40")]
    assert present(states()["modified"]).headline == "refund"  # without the template: never the old sentence


def test_a_superseded_card_says_what_became_of_the_edit() -> None:
    a = states()["superseded"]
    assert CONFIG.present(a).outcome == ("U_S1 edited it; the edit needs other approvers and went on as apr_0000000000")
    text = str(card(a, now=NOW, view=CONFIG.present(a)))
    assert "modified and approved" not in text and "edited it" in text


def test_labels_come_from_the_declared_schema_and_the_view_has_a_stable_digest() -> None:
    view = CONFIG.present(states()["pending"])
    assert [(f.name, f.label, f.help, f.currency) for f in view.fields] == [
        ("customer_id", "Customer", None, None),
        ("amount", "amount", "Gross amount", "EUR"),
    ]
    canonical = view.canonical()
    assert canonical["renderer"] == RENDERER and "expires_at" in canonical
    secret = CONFIG.present(states()["pending"].model_copy(update={"evidence": "call jane at [phone]"}))
    assert "jane" not in str(secret.canonical()) and secret.canonical()["evidence"]["length"] == 20
    assert secret.digest() != view.digest()  # the evidence is named by its digest: a different one, another view
    assert CONFIG.present(states()["pending"]).digest() == view.digest()
    assert CONFIG.present(states()["approved"]).digest() != view.digest()
    assert HitlConfig().present(states()["pending"]).fields[0].label == "customer_id"  # no schema: the name
