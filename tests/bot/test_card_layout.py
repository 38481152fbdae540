"""The card's layout in every state: the untrusted evidence comes after the controls, apart from them and in a style
no trusted block uses; every card is valid Block Kit (slack_sdk's models and Slack's limits); Trust asks for
consent with its scope, and the confirmations say what will happen."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from hitl.bot.views.blocks import card
from hitl.bot.views.evidence import EVIDENCE, EVIDENCE_LABEL
from hitl.engine.domain.models import Approval, ApprovalKind, Decision, DecisionKind, Status
from hitl.engine.service import TRUST_TTL
from hitl.sandbox.limits import message_problems
from hitl.testing import FakeClock, make_approval

EVIDENCE_TEXT = "Customer wrote: <!channel> *APPROVED by Security* ```break out``` http://evil.example\nsecond line"
NOW = FakeClock().now()


def _vote(kind: DecisionKind, reviewer: str = "U_SUPPORT1", at: float = NOW) -> Decision:
    return Decision(reviewer=reviewer, kind=kind, at=at, version=1, via="slack")


def _states() -> dict[str, Approval]:
    base = make_approval(now=NOW, evidence=EVIDENCE_TEXT).model_copy(update={"metadata": {TRUST_TTL: 3600.0}})
    approve, trust = _vote(DecisionKind.APPROVE), _vote(DecisionKind.TRUST)
    batch = make_approval(now=NOW, evidence=EVIDENCE_TEXT, args={"items": [{"to": f"u{i}"} for i in range(8)]})
    return {
        "pending": base,
        "one_of_two": base.model_copy(update={"quorum": 2, "decisions": (approve,), "version": 2}),
        "approved": base.model_copy(update={"status": Status.APPROVED, "decisions": (approve,), "version": 2}),
        "trusted": base.model_copy(update={"status": Status.EXECUTED, "decisions": (trust,), "version": 4}),
        "rejected": base.model_copy(
            update={"status": Status.REJECTED, "reason": "no", "decisions": (_vote(DecisionKind.REJECT),)}
        ),
        "modified": base.model_copy(update={"status": Status.APPROVED, "approved_args": {"order_id": "1"}}),
        "superseded": base.model_copy(update={"status": Status.SUPERSEDED, "superseded_by": "apr_0000000000"}),
        "expired": base.model_copy(update={"status": Status.EXPIRED}),
        "cancelled": base.model_copy(update={"status": Status.CANCELLED}),
        "executing": base.model_copy(update={"status": Status.EXECUTING}),
        "executed": base.model_copy(update={"status": Status.EXECUTED}),
        "failed": base.model_copy(update={"status": Status.FAILED}),
        "in_doubt": base.model_copy(
            update={"tool": "doubt:pay", "kind": ApprovalKind.DOUBT, "args": {"tool": "pay", "args": {"amount": 5}}}
        ),
        "batch": batch.model_copy(update={"metadata": {"batch": 8}}),
        "spot_check": base.model_copy(
            update={
                "tool": "spot:refund",
                "kind": ApprovalKind.SPOT_CHECK,
                "metadata": {"tier": "auto", "modifiable": False},
            }
        ),
        "spot_check_flagged": base.model_copy(
            update={
                "tool": "spot:refund",
                "kind": ApprovalKind.SPOT_CHECK,
                "status": Status.REJECTED,
                "reason": "wrong amount",
                "decisions": (_vote(DecisionKind.REJECT),),
                "metadata": {"tier": "auto"},
            }
        ),
    }


STATES = _states()


def _is_evidence(block: dict[str, Any]) -> bool:
    return block.get("block_id") in (EVIDENCE, EVIDENCE_LABEL)


def _boxes(blocks: list[dict[str, Any]], block_id: str = "hitl_args:") -> list[str]:
    """The texts of the preformatted boxes of the block whose id starts with ``block_id``."""
    [found] = [b for b in blocks if str(b.get("block_id", "")).startswith(block_id)]
    return [
        "".join(run["text"] for run in e["elements"])
        for e in found["elements"]
        if e["type"] == "rich_text_preformatted"
    ]


def test_every_argument_reads_as_its_name_and_its_value_in_a_box_summary_or_not() -> None:
    declared = {"properties": {"amount": {"type": "number", "title": "Amount", "description": "In EUR, <b>gross</b>"}}}
    flat = make_approval(now=NOW, args={"order_id": "78291", "amount": 49})
    blocks = card(flat, now=NOW, declared=declared)
    assert _boxes(blocks) == ['"78291"', "49"]
    [args] = [b for b in blocks if str(b.get("block_id", "")).startswith("hitl_args:")]
    amount = [run["text"] for run in args["elements"][2]["elements"]]
    assert amount == ["Amount", "  ", "amount", "  number", "\nIn EUR, <b>gross</b>"]  # rich text: literal help
    nested = make_approval(now=NOW, args={"order": {"id": "78291"}, "amount": 49})
    assert _boxes(card(nested, now=NOW)) == ['{\n "id": "78291"\n}', "49"]  # nested: exact JSON, in its box
    summarised = flat.model_copy(update={"summary": "Refund 49.00 for order “78291”"})
    assert _boxes(card(summarised, now=NOW, declared=declared)) == ['"78291"', "49"]  # a sentence hides no field


def _style(block: dict[str, Any]) -> tuple[str, str]:
    """A block's look: its type, and for rich text the kinds of element it holds."""
    if block["type"] == "rich_text":
        return "rich_text", ",".join(sorted({e["type"] for e in block["elements"]}))
    return block["type"], ""


@pytest.mark.parametrize("state", list(STATES))
def test_every_card_state_is_valid_block_kit(state: str) -> None:
    blocks = card(STATES[state], now=NOW)
    assert message_problems(blocks) == (None, [])
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.to_dict()  # slack_sdk checks its limits here


def test_trust_asks_for_consent_naming_its_scope_and_the_card_says_it_after() -> None:
    pending = card(STATES["pending"], now=NOW)
    [controls] = [b for b in pending if b["type"] == "actions"]
    trust = next(e for e in controls["elements"] if e["action_id"] == "hitl_trust")
    consent = trust["confirm"]["text"]["text"]
    assert consent.startswith("For agent:riley only:")  # whose calls it covers, first
    assert "refund" in consent and "ses_test" in consent and "1 hour" in consent
    assert "Never covers another requester, escalated approvals or tools marked always-ask" in consent
    assert trust["confirm"]["confirm"]["text"] == "Approve and trust"
    after = str(card(STATES["trusted"], now=NOW))
    assert "trusted the tool for this session" in after and "until 2027-01-15 09:00 UTC" in after


def test_the_confirmations_say_what_will_happen() -> None:
    def reject_text(a: Approval) -> str:
        [controls] = [b for b in card(a, now=NOW) if b["type"] == "actions"]
        return str(next(e for e in controls["elements"] if e["action_id"] == "hitl_reject")["confirm"]["text"]["text"])

    assert reject_text(STATES["pending"]).endswith("You can say why (optional).")
    required = STATES["pending"].model_copy(update={"reason_required": True})
    assert reject_text(required).endswith("You will be asked for a reason (required).")


def test_the_card_gives_plain_reasons_and_leaves_tiers_and_rules_to_show() -> None:
    from hitl.engine.config.hitl_yaml import parse_config
    from hitl.engine.domain.policy import PolicyContext

    config = parse_config(
        """
roles: {support: [U_S1], finance: [U_F1, U_F2]}
policy:
  tools:
    refund: {tier: approve, role: support, reason: "Refunds send money back to the customer."}
    wire: {tier: approve, role: finance, quorum: 2}
  rules:
    - {name: large_refund, tools: [refund], when: "args.amount > 500", tier: escalate, role: finance, quorum: 2,
       reason: "Refunds over 500 need two finance approvers."}
"""
    )
    policy, ctx = config.build_policy(), PolicyContext(now=NOW)
    assert policy.evaluate("refund", {"amount": 5}, ctx).why == ("Refunds send money back to the customer.",)
    big = policy.evaluate("refund", {"amount": 900}, ctx)
    assert big.why == ("Refunds over 500 need two finance approvers.", "Refunds send money back to the customer.")
    assert policy.evaluate("wire", {}, ctx).why == ("wire needs approval from 2 finance approvers.",)
    assert policy.evaluate("mystery", {}, ctx).why == ("hitl.yaml does not list mystery, so a person decides.",)

    a = make_approval(now=NOW).model_copy(update={"why": big.why, "reasons": big.reasons, "rule": big.rule})
    shown = str(card(a, now=NOW))
    assert "Refunds over 500 need two finance approvers." in shown
    assert "large_refund" not in shown and "tool policy sets" not in shown and "*Tier*" not in shown
    detailed = str(card(a, now=NOW, detail=True))  # /hitl show: the policy's own account too
    assert "large_refund" in detailed and "tool policy sets" in detailed


def test_an_edit_shows_before_and_after_on_every_card_it_touches() -> None:
    from hitl.engine.domain.edits import CHANGED

    base = make_approval(now=NOW)  # {"order_id": "78291", "amount": 49}
    edit = Decision(
        reviewer="U_SUPPORT1",
        kind=DecisionKind.MODIFY,
        at=NOW,
        version=1,
        args={"order_id": "78291", "amount": 700},
    )
    superseded = base.model_copy(
        update={"status": Status.SUPERSEDED, "decisions": (edit,), "superseded_by": "apr_0000000000"}
    )
    replacement = base.model_copy(
        update={"args": {"order_id": "78291", "amount": 700}, "metadata": {CHANGED: {"amount": [49, 700]}}}
    )
    approved = base.model_copy(update={"status": Status.APPROVED, "approved_args": {"order_id": "78291", "amount": 9}})
    for a, after in ((superseded, "700"), (replacement, "700"), (approved, "9")):
        blocks = card(a, now=NOW)
        assert "Changed by the reviewer" in str(blocks) and _boxes(blocks, "hitl_edit:") == ["49", after], blocks
    assert "Changed by the reviewer" not in str(card(base, now=NOW))


def test_times_read_the_readers_way_with_how_long_is_left() -> None:
    from hitl.bot.views.blocks import relative

    pending = str(card(STATES["pending"], now=NOW))  # expires an hour after NOW
    assert "{date_short_pretty} {time}|2027-01-15 09:00 UTC>" in pending  # Slack's token; the fallback names UTC
    assert "(in 60 min)" in pending or "(in 1 h)" in pending
    assert "(in " not in str(card(STATES["expired"], now=NOW + 7200))  # nothing left to count down
    assert [relative(NOW + d, NOW) for d in (30, 58 * 60, 3 * 3600 + 300, 3 * 86400)] == [
        "in under a minute",
        "in 58 min",
        "in 3 h 5 min",
        "in 3 days",
    ]
    assert [relative(NOW - d, NOW) for d in (5, 120, 26 * 3600)] == ["just now", "2 min ago", "26 h ago"]
