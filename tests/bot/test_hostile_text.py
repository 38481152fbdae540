"""No untrusted text becomes a mention, a link, formatting, a control, or breaks Slack's limits."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from hitl.bot.views.blocks import card
from hitl.bot.views.escape import escape_mrkdwn, label
from hitl.bot.views.group_cards import group_card, member_list_view
from hitl.bot.views.withdrawal import ReceiptsShown
from hitl.engine.domain.models import Decision, DecisionKind, Status
from hitl.engine.domain.redaction import bounded
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import InvalidInput
from hitl.engine.receipts.withdrawing import REASON_MAX
from hitl.sandbox.limits import MESSAGE_TEXT_BUDGET, message_problems
from hitl.testing import FakeClock, make_approval
from tests.bot.conftest import Harness
from tests.bot.hostile import HOSTILE, batches, carried
from tests.slack_text import typed_texts

TRUSTED = re.compile(r"<!date\^\d+\^\{date_short_pretty\} \{time\}\|[0-9: -]+UTC>|<@[UW][A-Z0-9_]+>")
INVISIBLE = re.compile(
    "[\u200b\u200c\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029"
    "\u061c\u3164\u115f\u1160\u180e\uffa0\u2800\U000e0000-\U000e007f\ud800-\udfff]"
)


def texts(value: Any) -> list[str]:
    return [text for _, text in typed_texts(value)]


def assert_inert(blocks: list[dict[str, Any]]) -> None:
    assert message_problems(blocks) == (None, [])
    for kind, text in typed_texts(blocks):
        assert not INVISIBLE.search(text), text[:200]
        if kind != "mrkdwn":
            assert kind in ("plain_text", "text"), kind  # nothing else carries text: both are shown literally
            continue
        stripped = TRUSTED.sub("", text)
        assert "<" not in stripped and ">" not in stripped, text[:200]
        if "```" in text:
            assert text.count("```") % 2 == 0  # every code block closed by our own fence only
    assert sum(len(t) for t in texts(blocks)) <= MESSAGE_TEXT_BUDGET


def test_the_corpus_holds_87_distinct_strings_and_one_only_a_python_str_can_hold() -> None:
    assert len(HOSTILE) == 87 and len(set(HOSTILE)) == 87
    assert [t for t in HOSTILE if not carried(t)] == ["lone \ud800 surrogate \udfff"]
    with pytest.raises(InvalidInput, match="lone surrogate"):  # refused where it arrives, never a UnicodeError
        ProposeRequest("refund", {"order_id": "1"}, session_id="s", evidence="lone \ud800")
    with pytest.raises(InvalidInput, match="lone surrogate"):
        DecideRequest("apr_1", "U_SUPPORT1", DecisionKind.REJECT, reason="\udfff")
    with pytest.raises(InvalidInput, match="args holds a lone surrogate"):
        make_approval(now=0, args={"note": "\ud800"})


def refused_where_it_arrives(hostile: str) -> bool:
    """Whether ``hostile`` is one no approval or decision can hold (a lone surrogate): then every way in refuses it
    with a coded error, and there is no card to draw."""
    if carried(hostile):
        return False
    with pytest.raises(InvalidInput, match="lone surrogate"):
        ProposeRequest("refund", {"order_id": "1"}, session_id="s", evidence=hostile)
    with pytest.raises(InvalidInput, match="lone surrogate"):
        DecideRequest("apr_1", "U_SUPPORT1", DecisionKind.REJECT, reason=hostile)
    return True


@pytest.mark.parametrize("hostile", HOSTILE, ids=[f"h{i}" for i in range(len(HOSTILE))])
def test_every_hostile_string_stays_inert_on_every_card_state(hostile: str) -> None:
    if refused_where_it_arrives(hostile):
        return
    clock = FakeClock()
    args = {"order_id": hostile[:5000], "note": hostile, "nested": {"x": [hostile[:100]]}}
    a = make_approval(now=clock.now(), args=args, evidence=bounded(hostile, 2000), requester=hostile[:80] or "x")
    assert_inert(card(a, now=clock.now()))
    vote = Decision(
        reviewer=hostile[:60] or "x",
        kind=DecisionKind.REJECT,
        at=clock.now(),
        version=1,
        reason=hostile,
        via=hostile[:10] or "x",
    )
    decided = a.model_copy(update={"status": Status.REJECTED, "reason": hostile, "version": 2, "decisions": (vote,)})
    assert_inert(card(decided, now=clock.now()))
    modified = a.model_copy(update={"status": Status.APPROVED, "approved_args": {"note": hostile[::-1]}})
    assert_inert(card(modified, now=clock.now()))
    # Withdrawn, by whoever and for whatever reason the trail says (the reason as a person typed it).
    withdrawn = ReceiptsShown(withdrawn_by=hostile[:60] or "x", reason=hostile[:REASON_MAX])
    assert_inert(card(modified.model_copy(update={"decisions": (vote,)}), now=clock.now(), receipts=withdrawn))


def test_escaping_is_minimal_and_truncation_never_splits_an_entity() -> None:
    assert escape_mrkdwn("a & b <c> d") == "a &amp; b &lt;c&gt; d"
    for n in range(1, 40):
        out = label("&" * 100, n)
        assert len(out) <= n and not re.search(r"&[a-z]{0,3}…$", out) and not out.endswith("&…")
    assert "[U+202E]" in label("\u202e") and label("a\nb`c") == "a b\u02cbc"


async def test_hostile_evidence_posts_through_slacks_validation(harness: Harness) -> None:
    batched = batches(HOSTILE, 1500)  # each card carries a batch whole, a line each: within the evidence's limit
    for i, batch in enumerate(batched):
        p = await harness.svc.propose(
            ProposeRequest(
                "refund",
                {"order_id": batch[0][:32], "customer_id": "C", "amount": 10 + i},
                session_id=f"hostile{i}",
                evidence="\n".join(batch),
            )
        )
        assert p.approval is not None
    assert sum(map(len, batched)) == len(HOSTILE) - 1  # all but the lone surrogate, which no request can carry
    posts = harness.state.calls_to("chat.postMessage")
    refused = [c.response.get("response_metadata") for c in posts if not c.response["ok"]]
    assert len(posts) == len(batched) and not refused, refused
    for m in harness.cards():
        assert_inert(m.blocks)
    assert "&lt;!channel&gt;" in json.dumps([m.blocks for m in harness.cards()])


@pytest.mark.parametrize("hostile", HOSTILE, ids=[f"h{i}" for i in range(len(HOSTILE))])
def test_every_hostile_string_stays_inert_on_a_group_card_and_its_list(hostile: str) -> None:
    if refused_where_it_arrives(hostile):
        return
    clock = FakeClock()
    members = [
        make_approval(
            now=clock.now() + i,
            key=f"g{i}",
            args={"order_id": hostile[:5000], "amount": i + 1, hostile[:40] or "k": 1},
            evidence=bounded(hostile, 2000),
            requester=hostile[:80] or "x",
        ).model_copy(update={"summary": hostile, "reasons": (hostile,), "why": (hostile,)})
        for i in range(7)
    ]
    blocks = group_card(members, now=clock.now())
    assert_inert(blocks)
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.to_dict()  # slack_sdk checks its limits here
    assert "hitl_evidence" not in json.dumps(blocks)  # no member's evidence on the group card
    assert_inert(member_list_view(members, 0)["blocks"])
    decided = [a.model_copy(update={"status": Status.REJECTED, "reason": hostile, "version": 2}) for a in members]
    assert_inert(group_card(decided, now=clock.now()))
