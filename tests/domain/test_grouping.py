"""What groups with what, what a group decision is bound to, and what its card adds up."""

from __future__ import annotations

from decimal import Decimal

from hitl.engine.domain.grouping import decidable_together, group_digest, group_key, in_order, key_amounts
from hitl.engine.domain.models import ApprovalKind, Tier
from hitl.testing import make_approval


def test_like_approvals_share_a_key_and_every_field_that_decides_who_decides_splits_them() -> None:
    a = make_approval(now=0, key="a", args={"order_id": "1", "amount": 5})
    b = make_approval(now=1, key="b", args={"order_id": "2", "amount": 7}, session_id="ses_other")
    assert group_key(a) == group_key(b) is not None  # another session, other arguments: the same group
    for change in (
        {"tool": "delete_customer"},
        {"requester": "agent:other"},
        {"tier": Tier.ESCALATE},  # escalated: never with smaller ones
        {"required_role": "finance"},
        {"quorum": 2},
        {"rule": "split_refunds"},
    ):
        assert group_key(b.model_copy(update=change)) != group_key(a), change


def test_a_practice_twin_groups_as_the_real_one_and_other_kinds_stand_alone() -> None:
    real = make_approval(now=0, key="real")
    twin = real.model_copy(
        update={"id": "apr_TWIN000000", "kind": ApprovalKind.PRACTICE, "metadata": {"kind": "practice"}}
    )
    assert group_key(twin) == group_key(real)
    for kind in (ApprovalKind.SPOT_CHECK, ApprovalKind.DOUBT, ApprovalKind.GATE, ApprovalKind.REVIEW):
        assert group_key(real.model_copy(update={"kind": kind})) is None
    assert group_key(real.model_copy(update={"metadata": {"batch": 3}})) is None


def test_the_digest_binds_every_member_its_version_and_its_order() -> None:
    members = [make_approval(now=i, key=f"m{i}") for i in range(3)]
    digest = group_digest(members)
    assert len(digest) == 64 and group_digest(list(members)) == digest
    assert group_digest(members[:2]) != digest  # one fewer
    assert group_digest([members[1], members[0], members[2]]) != digest  # reordered
    moved = members[1].model_copy(update={"version": 2})
    assert group_digest([members[0], moved, members[2]]) != digest  # one member moved
    assert in_order(list(reversed(members))) == members  # oldest first


def test_a_member_that_asks_for_more_than_a_click_makes_its_group_one_by_one() -> None:
    members = [make_approval(now=i, key=f"c{i}") for i in range(3)]
    assert decidable_together(members) and not decidable_together([])
    for asks in (
        members[1].model_copy(update={"confirm": ("amount",)}),
        members[1].model_copy(update={"approve_reason_required": True}),
    ):
        assert not decidable_together([members[0], asks, members[2]])
    caller_said = members[1].model_copy(update={"metadata": {"confirm": True}})  # metadata is the caller's: not hitl's
    assert decidable_together([members[0], caller_said, members[2]])


def test_key_amounts_are_exact_and_only_where_every_member_has_a_number() -> None:
    members = [
        make_approval(now=0, key="k0", args={"order_id": "1", "amount": 0.1, "fee": 2}),
        make_approval(now=1, key="k1", args={"order_id": "2", "amount": 0.2, "fee": True}),
        make_approval(now=2, key="k2", args={"order_id": "3", "amount": 1000000}),
    ]
    [amount] = key_amounts(members)  # fee: a bool in one, missing in another: no total a reviewer could trust
    assert (amount.name, amount.total, amount.low, amount.high) == (
        "amount",
        Decimal("1000000.3"),
        Decimal("0.1"),
        Decimal(1000000),
    )
    [money] = key_amounts(members, {"amount": "USD"})
    assert money.currency == "USD" and money.total == Decimal("1000000.3")
    assert key_amounts([]) == []
