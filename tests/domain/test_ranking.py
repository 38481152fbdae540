"""The queue's rank: read from the policy (how far over its threshold a rule found the action), kept as one integer
that orders tier band, then ratio, then deadline, and said in a few words."""

from __future__ import annotations

import pytest

from hitl.engine.domain.models import Tier
from hitl.engine.domain.policy import PolicyContext, WindowStats
from hitl.engine.domain.ranking import band_of, due_soon, queue_order, rank_key, waiting_text, why_ranked
from hitl.engine.domain.thresholds import threshold_of
from hitl.testing import make_approval
from tests.domain.test_policy import NOON, policy  # noqa: F401  (the fixture)

__all__ = ["policy"]


@pytest.mark.parametrize(
    ("expr", "found"),
    [
        ("args.amount > 500", ("amount", 500.0)),
        ("args.amount >= 2.5", ("amount", 2.5)),
        ("500 < args.amount", ("amount", 500.0)),
        ("args['total'] > 10", ("total", 10.0)),
        ("args.amount is defined and args.amount > 500", ("amount", 500.0)),
        ("args.amount < 5", None),  # below a number: no amount to be over
        ("args.amount > 0", None),  # no threshold to divide by
        ("args.amount > args.limit", None),
        ("tool == 'refund'", None),
        ("args.amount > True", None),
        ("args.amount >", None),  # does not parse: no threshold (the policy refuses it elsewhere)
    ],
)
def test_a_threshold_is_read_from_the_plain_forms_only(expr: str, found: tuple[str, float] | None) -> None:
    assert threshold_of(expr) == found


def test_the_verdict_says_how_far_over_its_rule_the_action_is(policy) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    big = policy.evaluate("refund", {"amount": 5000, "customer_id": "C1"}, PolicyContext(now=NOON))
    assert big.tier is Tier.ESCALATE and big.rule == "large_refund" and big.ratio == 10.0
    small = policy.evaluate("refund", {"amount": 40, "customer_id": "C1"}, PolicyContext(now=NOON))
    assert small.tier is Tier.APPROVE and small.ratio is None
    windows = {"split:C1": WindowStats(count=2, total=200.0)}  # 200 earlier + 40 now over a 120 threshold
    split = policy.evaluate("refund", {"amount": 40, "customer_id": "C1"}, PolicyContext(now=NOON, windows=windows))
    assert split.rule == "split" and split.ratio == 2.0
    text = policy.evaluate("refund", {"amount": "5000", "customer_id": "C1"}, PolicyContext(now=NOON))
    assert text.tier is Tier.ESCALATE and text.ratio is None  # failed closed on a string: escalated, no ratio claimed


def test_the_key_orders_band_then_ratio_then_deadline() -> None:
    now = 1_800_000_000.0
    soon = make_approval(now=now, key="soon", ttl=60)
    later = make_approval(now=now, key="later", ttl=3600)
    over = make_approval(now=now, key="over", ttl=7200).model_copy(update={"ratio": 1.5})
    far = make_approval(now=now, key="far", ttl=7200).model_copy(update={"ratio": 12.0})
    escalated = make_approval(now=now, key="esc", ttl=86400, tier=Tier.ESCALATE)
    huge = make_approval(now=now, key="huge", ttl=86400).model_copy(update={"ratio": 1e9})
    ordered = sorted([soon, later, over, far, escalated, huge], key=rank_key)
    assert [a.dedupe_key.split(":")[1] for a in ordered] == ["esc", "huge", "far", "over", "soon", "later"]
    assert all(0 <= rank_key(a) < 2**51 for a in ordered)  # exact as a double, on every store
    assert [band_of(a) for a in (escalated, soon)] == ["escalate", "approve"]
    assert why_ranked(far, now=now) == "approve · 12× its rule's limit · 2 h left"
    # Issue 63: one about to expire says first that it is due soon (and so ranks first), time left said once.
    assert why_ranked(over, now=now + 7100) == "due soon, so first: 1 min left · approve · 1.5× its rule's limit"
    assert why_ranked(huge, now=now) == "approve · over 1,000× its rule's limit · 24 h left"
    assert why_ranked(escalated, now=now + 86400) == "due soon, so first: past its deadline · escalated"


def test_one_about_to_expire_ranks_above_every_item_with_over_an_hour_left_whatever_its_tier() -> None:
    now = 1_800_000_000.0
    escalations = [make_approval(now=now, key=f"esc{i}", ttl=3 * 3600, tier=Tier.ESCALATE) for i in range(3)]
    handed_on = make_approval(now=now - 3540, key="handed", ttl=3600)  # created 59 min ago, 1 min left
    day = make_approval(now=now - 79200, key="day", ttl=86400)  # 2 h left of 24: under 10% of its timeout (2.4 h)
    calm = make_approval(now=now, key="calm", ttl=2 * 3600)  # 2 h left of 2 h
    stored = sorted([*escalations, handed_on, day, calm], key=rank_key)  # the stores' order: by tier first
    assert stored.index(handed_on) == 3
    shown = queue_order(stored, now=now)
    assert [a.dedupe_key.split(":")[1] for a in shown] == ["handed", "day", "esc0", "esc1", "esc2", "calm"]
    assert [due_soon(a, now=now) for a in (handed_on, day, calm, escalations[0])] == [True, True, False, False]
    assert why_ranked(handed_on, now=now) == "due soon, so first: 1 min left · approve"
    assert why_ranked(escalations[0], now=now) == "escalated · 3 h left"  # time left once, the tier a word
    # the floor is 10 minutes: a 30-minute approval with 11 minutes left is not due soon, with 9 it is
    short = make_approval(now=now, key="short", ttl=1800)
    assert not due_soon(short, now=now + 19 * 60) and due_soon(short, now=now + 21 * 60)


def test_how_much_waits_is_said_in_words() -> None:
    assert [waiting_text(n) for n in (0, 1, 2, 1234, 1000)] == [
        "Nothing waits on you",
        "1 approval waits on you",
        "2 approvals wait on you",
        "1,000+ approvals wait on you",
        "1,000+ approvals wait on you",
    ]
