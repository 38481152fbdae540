"""Conformance for delegations: given once per delegator at a time, ended once, run out once, each audited; and a
decision cast through a delegated role keeps the delegator and the delegate one person and one vote.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.delegation import Delegation, acting_reviewer
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status
from hitl.engine.errors import DecisionRefused, ErrorCode
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.factories import make_approval

__all__ = ["DelegationsConformance"]

DAY = 86400.0
OWN = {"U_ANA": frozenset({"finance"}), "U_BEN": frozenset({"support"}), "U_CY": frozenset({"finance"})}


def _given(clock: FakeClock, delegator: str, delegate: str, *, days: float = 7, role: str | None = None) -> Delegation:
    return Delegation(
        id=f"dlg_{delegator}_{delegate}_{int(clock.now())}",
        delegator=delegator,
        delegate=delegate,
        role=role,
        given_at=clock.now(),
        until=clock.now() + days * DAY,
        via="cli",
    )


async def _as(store: Store, clock: FakeClock, reviewer_id: str) -> Reviewer:
    """``reviewer_id`` with their own roles and what the delegations in force in the store add."""
    me = Reviewer(id=reviewer_id, roles=OWN.get(reviewer_id, frozenset()))
    found = await store.delegations.active(now=clock.now())
    return acting_reviewer(me, found, now=clock.now(), own_roles=lambda who: OWN.get(who, frozenset()))


def _by(a: Approval, who: Reviewer, kind: DecisionKind = DecisionKind.APPROVE, **kw: Any) -> DecideCommand:
    """A decide command by ``who`` (as :func:`_as` resolved them), bound to ``a``'s version and hash."""
    return cmd(a, who.id, kind, roles=who.roles, **kw).model_copy(update={"reviewer": who})


class DelegationsConformance:
    """What every store must do here."""

    async def test_given_once_per_delegator_ended_once_each_audited(self, store: Store, clock: FakeClock) -> None:
        assert await store.delegations.active(now=clock.now()) == []
        first = _given(clock, "U_ANA", "U_BEN")
        assert await store.delegations.give(first, now=clock.now()) is None
        clock.advance(1)
        second = _given(clock, "U_ANA", "U_CY", role="finance")
        assert await store.delegations.give(second, now=clock.now()) == first  # one in force at a time
        other = _given(clock, "U_CY", "U_BEN")
        assert await store.delegations.give(other, now=clock.now()) is None
        assert await store.delegations.active(now=clock.now()) == [first, other]
        clock.advance(1)
        ended = await store.delegations.end(first.id, by="U_ANA", now=clock.now())
        assert ended == first.model_copy(update={"ended_at": clock.now(), "ended_by": "U_ANA"})
        assert await store.delegations.end(first.id, by="U_ANA", now=clock.now()) is None  # ended once
        assert await store.delegations.end("dlg_none", by="U_ANA", now=clock.now()) is None
        assert await store.delegations.active(now=clock.now()) == [other]
        assert await store.delegations.give(second, now=clock.now()) is None  # free again
        trail = [(e.event, e.actor) for e in await store.audit.entries() if "delegat" in e.event]
        assert trail == [
            ("delegated", "U_ANA"),
            ("delegated", "U_CY"),
            ("delegation_ended", "U_ANA"),
            ("delegated", "U_ANA"),
        ]
        checked, broken = await store.audit.verify()
        assert broken is None and checked >= 4

    async def test_a_delegation_runs_out_once_audited(self, store: Store, clock: FakeClock) -> None:
        short = _given(clock, "U_ANA", "U_BEN", days=1)
        await store.delegations.give(short, now=clock.now())
        assert await store.delegations.lapsed(now=clock.now()) == []
        clock.advance(DAY)  # its last instant has passed: no longer in force, even before the sweep
        assert await store.delegations.active(now=clock.now()) == []
        assert await store.delegations.end(short.id, by="U_ANA", now=clock.now()) is None
        ran_out = await store.delegations.lapsed(now=clock.now())
        assert ran_out == [short.model_copy(update={"ended_at": short.until, "ended_by": "expiry"})]
        assert await store.delegations.lapsed(now=clock.now()) == []  # recorded once
        ends = [e.detail for e in await store.audit.entries() if e.event == "delegation_ended"]
        assert ends == [f"U_ANA's delegation of their roles to U_BEN ran out ({short.id})"]
        assert await store.delegations.give(_given(clock, "U_ANA", "U_CY"), now=clock.now()) is None

    async def test_simultaneous_gives_by_one_delegator_write_one(self, store: Store, clock: FakeClock) -> None:
        tries = [_given(clock, "U_ANA", f"U_D{i}").model_copy(update={"id": f"dlg_race_{i}"}) for i in range(8)]
        results = await asyncio.gather(*(store.delegations.give(d, now=clock.now()) for d in tries))
        assert sum(r is None for r in results) == 1
        (winner,) = await store.delegations.active(now=clock.now())
        assert all(r == winner for r in results if r is not None)

    async def test_a_delegate_decides_for_the_delegator_as_one_person(self, store: Store, clock: FakeClock) -> None:
        await store.delegations.give(_given(clock, "U_ANA", "U_BEN"), now=clock.now())
        ben = await _as(store, clock, "U_BEN")
        assert ben.roles == {"support", "finance"} and dict(ben.delegated) == {"finance": "U_ANA"}
        # Two finance approvers needed: Ben's vote is Ana's too, so Ana cannot add a second one, nor Ben again.
        a = make_approval(now=clock.now(), role="finance", quorum=2, key="two")
        await store.approvals.create(a)
        voted = await store.approvals.decide(_by(a, ben), now=clock.now())
        assert voted.status is Status.PENDING and voted.decisions[-1].acting_for == "U_ANA"
        ana = await _as(store, clock, "U_ANA")
        for who in (ana, ben):
            with pytest.raises(DecisionRefused) as dup:
                await store.approvals.decide(_by(voted, who), now=clock.now())
            assert dup.value.code is ErrorCode.DUPLICATE_VOTE
        cy = await _as(store, clock, "U_CY")
        done = await store.approvals.decide(_by(voted, cy), now=clock.now())
        assert done.status is Status.APPROVED and [d.acting_for for d in done.decisions] == ["U_ANA", None]
        decided = [e.detail for e in await store.audit.entries(approval_id=a.id) if e.event == "decided"]
        assert "acting for U_ANA (delegation)" in decided[0] and "acting for" not in decided[1]

    async def test_a_vote_cast_for_a_delegator_stays_theirs_after_the_end(self, store: Store, clock: FakeClock) -> None:
        given = _given(clock, "U_ANA", "U_BEN")
        await store.delegations.give(given, now=clock.now())
        a = make_approval(now=clock.now(), role="finance", quorum=2, key="after")
        await store.approvals.create(a)
        ben = await _as(store, clock, "U_BEN")
        voted = await store.approvals.decide(_by(a, ben), now=clock.now())
        await store.delegations.end(given.id, by="U_ANA", now=clock.now())
        ana = await _as(store, clock, "U_ANA")
        assert ana.linked == frozenset()
        with pytest.raises(DecisionRefused) as dup:
            await store.approvals.decide(_by(voted, ana), now=clock.now())
        assert dup.value.code is ErrorCode.DUPLICATE_VOTE
        ben_after = await _as(store, clock, "U_BEN")  # the delegation ended: finance is no longer Ben's
        b = make_approval(now=clock.now(), role="finance", key="b")
        await store.approvals.create(b)
        with pytest.raises(DecisionRefused) as gone:
            await store.approvals.decide(_by(b, ben_after), now=clock.now())
        assert gone.value.code is ErrorCode.NOT_ELIGIBLE

    async def test_neither_decides_the_others_request(self, store: Store, clock: FakeClock) -> None:
        await store.delegations.give(_given(clock, "U_ANA", "U_BEN"), now=clock.now())
        by_ana = make_approval(now=clock.now(), role="finance", requester="U_ANA", key="ana")
        by_ben = make_approval(now=clock.now(), role="support", requester="U_BEN", key="ben")
        for a in (by_ana, by_ben):
            await store.approvals.create(a)
        ben, ana = await _as(store, clock, "U_BEN"), await _as(store, clock, "U_ANA")
        for a, who in ((by_ana, ben), (by_ben, ana)):
            with pytest.raises(DecisionRefused) as sod:
                await store.approvals.decide(_by(a, who), now=clock.now())
            assert sod.value.code is ErrorCode.SELF_APPROVAL
        assert (await store.approvals.get(by_ana.id)).status is Status.PENDING

    async def test_own_role_is_decided_in_own_right(self, store: Store, clock: FakeClock) -> None:
        await store.delegations.give(_given(clock, "U_ANA", "U_CY"), now=clock.now())  # both hold finance
        cy = await _as(store, clock, "U_CY")
        assert cy.delegated == () and cy.linked == {"U_ANA"}
        a = make_approval(now=clock.now(), role="finance", key="own")
        await store.approvals.create(a)
        done = await store.approvals.decide(_by(a, cy, DecisionKind.REJECT, reason="no"), now=clock.now())
        assert done.status is Status.REJECTED and done.decisions[-1].acting_for is None
