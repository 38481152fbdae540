"""Conformance for trust grants: each covers one requester in one session, and a reviewer's Trust writes its grant
in the decision's own atomic step (never for a practice approval).

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.models import ApprovalKind, DecisionKind, Status
from hitl.engine.domain.records import TrustGrant
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.factories import make_approval

__all__ = ["TrustConformance", "grant"]

RILEY = "agent:riley"


def grant(session_id: str, tool: str, *, until: float, requester: str = RILEY, by: str = "U_SUPPORT1") -> TrustGrant:
    """A grant of ``tool`` to ``requester`` in ``session_id`` until ``until``."""
    return TrustGrant(session_id=session_id, requester=requester, tool=tool, granted_by=by, until=until)


class TrustConformance:
    """What every store must do here."""

    async def test_trust_grants_expire_and_revoke(self, store: Store, clock: FakeClock) -> None:
        now = clock.now()
        await store.trust.grant(grant("s1", "refund", until=now + 60), now=now)
        await store.trust.grant(grant("s1", "email", until=now + 600), now=now)
        assert [g.tool for g in await store.trust.active("s1", requester=RILEY, now=now)] == ["email", "refund"]
        assert await store.trust.active("s2", requester=RILEY, now=now) == []
        await store.trust.grant(grant("s2", "email", until=now + 60, by="U_SUPPORT2"), now=now)
        assert [(g.session_id, g.tool) for g in await store.trust.all_active(now=now)] == [
            ("s1", "email"),
            ("s1", "refund"),
            ("s2", "email"),
        ]
        now = clock.advance(61)
        assert [g.tool for g in await store.trust.active("s1", requester=RILEY, now=now)] == ["email"]
        assert await store.trust.revoke("s1", "email", by="U_SUPPORT2", now=now) == 1
        assert await store.trust.revoke("s1", "email", by="U_SUPPORT2", now=now) == 0
        assert await store.trust.active("s1", requester=RILEY, now=now) == []
        assert [(g.session_id, g.tool) for g in await store.trust.all_active(now=now)] == []

    async def test_a_grant_covers_its_requester_alone(self, store: Store, clock: FakeClock) -> None:
        now = clock.now()
        await store.trust.grant(grant("s1", "pay", until=now + 60), now=now)
        assert await store.trust.active("s1", requester="agent:mallory", now=now) == []
        assert [g.requester for g in await store.trust.active("s1", requester=RILEY, now=now)] == [RILEY]
        await store.trust.grant(grant("s1", "pay", until=now + 60, requester="agent:mallory"), now=now)
        assert await store.trust.revoke("s1", "pay", requester="agent:mallory", by="U_SUPPORT1", now=now) == 1
        assert [g.requester for g in await store.trust.all_active(now=now)] == [RILEY]

    async def test_session_ids_that_look_like_keys_stay_apart(self, store: Store, clock: FakeClock) -> None:
        # Caller-chosen ids with a store's separators in them build no other record's key.
        now = clock.now()
        odd = ["a:b", "a", "{a}", "a}:{b", "%3A", ":"]
        for i, session in enumerate(odd):
            await store.trust.grant(grant(session, f"t{i}", until=now + 60), now=now)
        for i, session in enumerate(odd):
            assert [g.tool for g in await store.trust.active(session, requester=RILEY, now=now)] == [f"t{i}"]

    async def test_a_trust_decision_writes_its_grant_with_the_decision(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now(), session_id="ses:riley{1}")
        await store.approvals.create(a)
        until = clock.now() + 3600
        out = await store.approvals.decide(cmd(a, "U_SUPPORT1", DecisionKind.TRUST, trust_until=until), now=clock.now())
        assert out.status is Status.APPROVED
        grants = await store.trust.active(a.session_id, requester=a.requester, now=clock.now())
        assert [(g.tool, g.granted_by, g.until) for g in grants] == [(a.tool, "U_SUPPORT1", until)]
        assert await store.trust.active(a.session_id, requester="agent:other", now=clock.now()) == []
        decided = (await store.audit.entries(approval_id=a.id))[-1]
        assert decided.event == "decided"
        assert decided.detail.endswith(f"; trusts {a.tool} for {a.requester} in session {a.session_id}")

    async def test_a_refused_or_partial_trust_grants_nothing(self, store: Store, clock: FakeClock) -> None:
        until = clock.now() + 3600
        stale = make_approval(now=clock.now(), key="stale")
        await store.approvals.create(stale)
        refused = cmd(stale, "U_SUPPORT1", DecisionKind.TRUST, trust_until=until, expected_version=7)
        try:
            await store.approvals.decide(refused, now=clock.now())
        except Exception as exc:  # a stale version: refused, and nothing granted
            assert type(exc).__name__ == "StaleVersion"
        else:
            raise AssertionError("a stale trust was recorded")
        two = make_approval(now=clock.now(), key="two", quorum=2, tool="pay")
        await store.approvals.create(two)
        first = await store.approvals.decide(
            cmd(two, "U_SUPPORT1", DecisionKind.TRUST, trust_until=until), now=clock.now()
        )
        assert first.status is Status.PENDING  # one vote of two: nothing is approved, so nothing is trusted
        assert await store.trust.all_active(now=clock.now()) == []

    async def test_a_practice_approvals_trust_grants_nothing(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        twin = a.model_copy(update={"kind": ApprovalKind.PRACTICE, "metadata": {"of": "apr_REAL"}})
        await store.approvals.create(twin)
        out = await store.approvals.decide(
            cmd(twin, "U_SUPPORT1", DecisionKind.TRUST, trust_until=clock.now() + 3600), now=clock.now()
        )
        assert out.status is Status.APPROVED and out.decisions[-1].kind is DecisionKind.TRUST  # recorded: a miss
        assert await store.trust.all_active(now=clock.now()) == []
        assert "trusts" not in (await store.audit.entries(approval_id=a.id))[-1].detail
