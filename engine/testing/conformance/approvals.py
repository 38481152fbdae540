"""Conformance for the approval store: create, decide, refusals, expiry, listing, transitions, waiting.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, IllegalTransition, NotFound, StaleVersion
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.approval_filters import ApprovalFiltersConformance
from hitl.engine.testing.conformance.approval_queues import ApprovalQueuesConformance
from hitl.engine.testing.conformance.helpers import SUPPORT, cmd
from hitl.engine.testing.factories import make_approval

__all__ = ["ApprovalsConformance"]


class ApprovalsConformance(ApprovalQueuesConformance, ApprovalFiltersConformance):
    """What every store must do here."""

    async def test_create_get_roundtrip_keeps_args_exact(self, store: Store, clock: FakeClock) -> None:
        args = {
            "amount": 12345678.123456789,
            "note": "Grüße 👋🏽 <!channel>",
            "nested": {"b": [1, 2.5, None]},
        }
        a = make_approval(now=clock.now(), args=args, evidence="customer says hi")
        stored, created = await store.approvals.create(a)
        assert created and stored == a
        got = await store.approvals.get(a.id)
        assert got == a
        assert got.args["amount"] == 12345678.123456789

    async def test_create_is_idempotent_on_dedupe_key(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        approved = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        again, created = await store.approvals.create(make_approval(now=clock.advance(5)))
        assert not created
        assert again == approved

    async def test_an_id_collision_is_refused_never_returned(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now(), tool="refund", args={"amount": 5})
        await store.approvals.create(a)
        other = make_approval(now=clock.now(), tool="delete_customer", args={"customer_id": "C1"}, key="other")
        forged = other.model_copy(update={"id": a.id})  # a different dedupe key whose id happens to match
        with pytest.raises(EngineError) as err:
            await store.approvals.create(forged)
        assert err.value.code is ErrorCode.ID_COLLISION and err.value.context["approval_id"] == a.id
        assert await store.approvals.get(a.id) == a

    async def test_unknown_id_is_not_found_and_writes_nothing(self, store: Store, clock: FakeClock) -> None:
        with pytest.raises(NotFound) as err:
            await store.approvals.get("apr_NOPE")
        assert err.value.code is ErrorCode.NOT_FOUND
        ghost = make_approval(now=clock.now(), key="ghost")
        with pytest.raises(NotFound):
            await store.approvals.decide(cmd(ghost, "U_SUPPORT1"), now=clock.now())
        with pytest.raises(NotFound):
            await store.approvals.get(ghost.id)
        assert await store.audit.entries(approval_id=ghost.id) == []

    async def test_approve_records_once_and_audits(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        out = await store.approvals.decide(cmd(a, "U_SUPPORT1", via="cli"), now=clock.advance(1))
        assert out.status is Status.APPROVED and out.version == 2
        assert [(d.reviewer, d.kind, d.via) for d in out.decisions] == [("U_SUPPORT1", DecisionKind.APPROVE, "cli")]
        log = await store.audit.entries(approval_id=a.id)
        assert [(e.event, e.actor, e.outcome, e.version) for e in log] == [
            ("created", "agent:riley", "ok", 1),
            ("decided", "U_SUPPORT1", "ok", 2),
        ]

    async def test_a_decision_past_its_answer_deadline_is_refused_and_audited(
        self, store: Store, clock: FakeClock
    ) -> None:
        """``answer_by`` is wall-clock time read by the store inside its atomic step: a surface that stopped
        waiting and said "not recorded" is never contradicted by the decision landing later."""
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        with pytest.raises(DecisionRefused) as refused:
            late = cmd(a, "U_SUPPORT1", jobs=("card",), answer_by=time.time() - 0.5)
            await store.approvals.decide(late, now=clock.now())
        assert refused.value.code is ErrorCode.TOO_LATE and refused.value.retryable
        assert (await store.approvals.get(a.id)) == a
        assert await store.jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=30) == []
        log = await store.audit.entries(approval_id=a.id)
        assert [(e.event, e.outcome) for e in log] == [("created", "ok"), ("refused", "too_late")]
        out = await store.approvals.decide(cmd(a, "U_SUPPORT1", answer_by=time.time() + 30), now=clock.now())
        assert out.status is Status.APPROVED

    async def test_new_approvals_are_announced_to_a_watcher(self, store: Store, clock: FakeClock) -> None:
        """The first call starts watching; each later one returns what was created since, by any process."""
        assert await store.approvals.wait_created(timeout=0.01) == []
        first, second = make_approval(now=clock.now(), key="w1"), make_approval(now=clock.now(), key="w2")
        assert await store.approvals.wait_created(timeout=0.01) == []  # nothing new: it waited and gave up

        async def later() -> None:
            await asyncio.sleep(0.02)
            await store.approvals.create(first)
            await store.approvals.create(second)

        maker = asyncio.create_task(later())
        seen: list[str] = []
        for _ in range(50):
            seen += await store.approvals.wait_created(timeout=5)
            if len(seen) == 2:
                break
        await maker
        assert seen == [first.id, second.id]
        await store.approvals.create(first)  # asked again: not new
        assert await store.approvals.wait_created(timeout=0.05) == []

    async def test_a_decision_queues_its_follow_up_jobs_in_its_own_step(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        with pytest.raises(DecisionRefused):  # refused: nothing queued
            await store.approvals.decide(cmd(a, "agent:riley", jobs=("card", "hook")), now=clock.now())
        assert await store.jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=30) == []
        await store.approvals.decide(cmd(a, "U_SUPPORT1", jobs=("card", "hook")), now=clock.advance(1))
        for kind in ("card", "hook"):
            jobs = await store.jobs.claim("w", kind=kind, limit=10, now=clock.now(), lease=30)
            assert [(j.kind, j.payload) for j in jobs] == [(kind, {"approval_id": a.id})]
            await store.jobs.ack(jobs[0].id)
        b = make_approval(now=clock.now(), key="b")
        await store.approvals.create(b)
        await store.approvals.decide(cmd(b, "U_SUPPORT1"), now=clock.now())  # none asked for: none queued
        assert await store.jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=30) == []

    async def test_a_decision_queues_its_runs_resume_in_its_own_step_once_decided(
        self, store: Store, clock: FakeClock
    ) -> None:
        """One outbox per decision: a workflow step's approval, once decided, carries its run's resume in the same
        step; a vote that leaves it pending, a refusal, or an approval of no run queue nothing."""

        def step_approval(key: str, quorum: int = 1) -> Approval:
            a = make_approval(now=clock.now(), session_id="ses_run", key=key, quorum=quorum)
            return a.model_copy(update={"metadata": {"step": "refund", "kind": "tool"}})

        async def resumes() -> list[dict[str, object]]:
            jobs = await store.jobs.claim("w", kind="resume", limit=10, now=clock.now(), lease=30)
            for j in jobs:
                await store.jobs.ack(j.id)
            return [j.payload for j in jobs]

        a = step_approval("a")
        await store.approvals.create(a)
        with pytest.raises(DecisionRefused):  # the requester: refused, nothing queued
            await store.approvals.decide(cmd(a, "agent:riley", run_jobs=("resume",)), now=clock.now())
        assert await resumes() == []
        await store.approvals.decide(cmd(a, "U_SUPPORT1", jobs=("card",), run_jobs=("resume",)), now=clock.now())
        assert await resumes() == [{"session_id": "ses_run", "approval_id": a.id}]

        two = step_approval("two", quorum=2)
        await store.approvals.create(two)
        voted = await store.approvals.decide(cmd(two, "U_SUPPORT1", run_jobs=("resume",)), now=clock.now())
        assert voted.status is Status.PENDING and await resumes() == []  # one vote of two: nothing to resume yet
        await store.approvals.decide(cmd(voted, "U_SUPPORT2", run_jobs=("resume",)), now=clock.now())
        assert await resumes() == [{"session_id": "ses_run", "approval_id": two.id}]

        rejected = step_approval("rejected")
        await store.approvals.create(rejected)
        await store.approvals.decide(
            cmd(rejected, "U_SUPPORT1", DecisionKind.REJECT, reason="no", run_jobs=("resume",)), now=clock.now()
        )
        assert await resumes() == [{"session_id": "ses_run", "approval_id": rejected.id}]

        alone = make_approval(now=clock.now(), key="alone")  # an agent's ask: no run to resume
        await store.approvals.create(alone)
        await store.approvals.decide(cmd(alone, "U_SUPPORT1", run_jobs=("resume",)), now=clock.now())
        assert await resumes() == []

    async def test_200_concurrent_deciders_exactly_one_wins(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        reviewers = [f"U_R{i:03d}" for i in range(200)]
        results = await asyncio.gather(
            *(store.approvals.decide(cmd(a, r), now=clock.now()) for r in reviewers), return_exceptions=True
        )
        wins = [r for r in results if isinstance(r, Approval)]
        losses = [r for r in results if isinstance(r, DecisionRefused)]
        assert len(wins) == 1 and len(losses) == 199
        winner = wins[0].decisions[0].reviewer
        assert all(e.code is ErrorCode.ALREADY_DECIDED and e.context["winner"] == winner for e in losses)
        assert all(winner in e.message for e in losses)
        final = await store.approvals.get(a.id)
        assert final.version == 2 and len(final.decisions) == 1
        log = await store.audit.entries(approval_id=a.id)
        assert sum(e.event == "decided" for e in log) == 1 and sum(e.event == "refused" for e in log) == 199

    async def test_approve_racing_reject_gives_one_terminal_state(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        calls = []
        for i in range(50):
            kind = DecisionKind.APPROVE if i % 2 else DecisionKind.REJECT
            calls.append(store.approvals.decide(cmd(a, f"U_X{i}", kind, reason="no"), now=clock.now()))
        results = await asyncio.gather(*calls, return_exceptions=True)
        wins = [r for r in results if isinstance(r, Approval)]
        assert len(wins) == 1
        final = await store.approvals.get(a.id)
        assert final.status in (Status.APPROVED, Status.REJECTED) and final == wins[0]

    @pytest.mark.parametrize("case", ["stale", "hash", "expired", "ineligible", "self", "duplicate", "trust"])
    async def test_refusals_change_nothing_and_are_audited(self, store: Store, clock: FakeClock, case: str) -> None:
        a = make_approval(
            now=clock.now(),
            quorum=2 if case == "duplicate" else 1,
            trustable=case != "trust",
            role="finance" if case == "duplicate" else "support",
        )
        await store.approvals.create(a)
        roles = frozenset({"finance"}) if case == "duplicate" else SUPPORT
        if case == "duplicate":
            a = await store.approvals.decide(cmd(a, "U_FIN1", roles=roles), now=clock.now())
        c, now = cmd(a, "U_SUPPORT1", roles=roles), clock.now()
        expected = {
            "stale": ErrorCode.STALE_VERSION,
            "hash": ErrorCode.HASH_MISMATCH,
            "expired": ErrorCode.EXPIRED,
            "ineligible": ErrorCode.NOT_ELIGIBLE,
            "self": ErrorCode.SELF_APPROVAL,
            "duplicate": ErrorCode.DUPLICATE_VOTE,
            "trust": ErrorCode.NOT_TRUSTABLE,
        }[case]
        if case == "stale":
            c = c.model_copy(update={"expected_version": a.version - 1})
        elif case == "hash":
            c = c.model_copy(update={"expected_hash": "0" * 64})
        elif case == "expired":
            now = a.expires_at
        elif case == "ineligible":
            c = cmd(a, "U_STRANGER", roles=frozenset())
        elif case == "self":
            c = cmd(a, "agent:riley")
        elif case == "duplicate":
            c = cmd(a, "U_FIN1", roles=roles)
        elif case == "trust":
            c = cmd(a, "U_SUPPORT1", DecisionKind.TRUST)
        before = await store.approvals.get(a.id)
        with pytest.raises(EngineError) as err:
            await store.approvals.decide(c, now=now)
        assert err.value.code is expected
        assert isinstance(err.value, StaleVersion if case == "stale" else DecisionRefused)
        assert await store.approvals.get(a.id) == before
        last = (await store.audit.entries(approval_id=a.id))[-1]
        assert (last.event, last.outcome, last.actor) == ("refused", str(expected), c.reviewer.id)

    async def test_quorum_needs_distinct_approvers(self, store: Store, clock: FakeClock) -> None:
        fin = frozenset({"finance"})
        a = make_approval(now=clock.now(), role="finance", quorum=2, trustable=False)
        await store.approvals.create(a)
        one = await store.approvals.decide(cmd(a, "U_FIN1", roles=fin), now=clock.now())
        assert one.status is Status.PENDING and one.version == 2 and one.approvers == ("U_FIN1",)
        two = await store.approvals.decide(cmd(one, "U_FIN2", roles=fin), now=clock.now())
        assert two.status is Status.APPROVED and two.approvers == ("U_FIN1", "U_FIN2")

    async def test_reject_modify_and_supersede(self, store: Store, clock: FakeClock) -> None:
        r = make_approval(now=clock.now(), key="r")
        await store.approvals.create(r)
        rejected = await store.approvals.decide(
            cmd(r, "U_SUPPORT1", DecisionKind.REJECT, reason="wrong order"), now=clock.now()
        )
        assert rejected.status is Status.REJECTED and rejected.reason == "wrong order"
        m = make_approval(now=clock.now(), key="m")
        await store.approvals.create(m)
        new_args = {"order_id": "78291", "amount": 40.0}
        mod = await store.approvals.decide(cmd(m, "U_SUPPORT1", DecisionKind.MODIFY, args=new_args), now=clock.now())
        assert mod.status is Status.APPROVED and mod.execute_args == new_args and mod.args == m.args
        q = make_approval(now=clock.now(), key="q", quorum=2)
        await store.approvals.create(q)
        with pytest.raises(DecisionRefused) as err:
            await store.approvals.decide(cmd(q, "U_SUPPORT1", DecisionKind.MODIFY, args=new_args), now=clock.now())
        assert err.value.code is ErrorCode.INVALID_INPUT
        sup = await store.approvals.decide(
            cmd(q, "U_SUPPORT1", DecisionKind.MODIFY, args=new_args, supersede_with="apr_NEW"),
            now=clock.now(),
        )
        assert sup.status is Status.SUPERSEDED and sup.superseded_by == "apr_NEW"

    async def test_expiry_is_recorded_as_expiry(self, store: Store, clock: FakeClock) -> None:
        due = make_approval(now=clock.now(), key="due", ttl=60)
        later = make_approval(now=clock.now(), key="later", ttl=600)
        for a in (due, later):
            await store.approvals.create(a)
        assert await store.approvals.expire_due(now=clock.advance(30)) == []
        expired = await store.approvals.expire_due(now=clock.advance(31))
        assert [a.id for a in expired] == [due.id]
        got = await store.approvals.get(due.id)
        assert got.status is Status.EXPIRED and got.decisions == () and got.version == 2
        assert (await store.audit.entries(approval_id=due.id))[-1].event == "expired"
        assert (await store.approvals.get(later.id)).status is Status.PENDING
        with pytest.raises(DecisionRefused) as err:
            await store.approvals.decide(cmd(due, "U_SUPPORT1"), now=clock.now())
        assert err.value.code is ErrorCode.EXPIRED
        assert await store.approvals.expire_due(now=clock.now()) == []

    async def test_decision_racing_expiry_exactly_one_wins(self, store: Store, clock: FakeClock) -> None:
        for i in range(20):
            a = make_approval(now=clock.now(), key=f"race{i}", ttl=10)
            await store.approvals.create(a)
            decided, expired = await asyncio.gather(
                store.approvals.decide(cmd(a, "U_SUPPORT1"), now=a.expires_at - 0.001),
                store.approvals.expire_due(now=a.expires_at + 0.001),
                return_exceptions=True,
            )
            final = await store.approvals.get(a.id)
            if isinstance(decided, Approval):
                assert final.status is Status.APPROVED and expired == []
            else:
                assert isinstance(decided, DecisionRefused) and decided.code is ErrorCode.EXPIRED
                assert final.status is Status.EXPIRED and [x.id for x in expired] == [a.id]  # type: ignore[union-attr]

    async def test_an_approval_that_asks_more_than_a_click_is_approved_only_when_its_surface_checked_it(
        self, store: Store, clock: FakeClock
    ) -> None:
        a = make_approval(now=clock.now(), key="typed").model_copy(update={"confirm": ("amount",)})
        await store.approvals.create(a)
        for kind in (DecisionKind.APPROVE, DecisionKind.MODIFY):
            with pytest.raises(DecisionRefused) as refused:
                await store.approvals.decide(cmd(a, "U_SUPPORT1", kind, args=a.args), now=clock.now())
            assert refused.value.code is ErrorCode.CONFIRMATION_MISMATCH
        assert (await store.approvals.get(a.id)).version == 1  # nothing recorded
        refusals = [e for e in await store.audit.entries(approval_id=a.id) if e.event == "refused"]
        assert [e.outcome for e in refusals] == ["confirmation_mismatch"] * 2
        rejected = make_approval(now=clock.now(), key="typed-reject").model_copy(
            update={"approve_reason_required": True}
        )
        await store.approvals.create(rejected)
        out = await store.approvals.decide(cmd(rejected, "U_SUPPORT1", DecisionKind.REJECT), now=clock.now())
        assert out.status is Status.REJECTED  # rejecting never asks it
        done = await store.approvals.decide(cmd(a, "U_SUPPORT1", attended=True), now=clock.now())
        assert done.status is Status.APPROVED

    async def test_a_self_approval_is_its_persons_alone_and_audited_basis_self(
        self, store: Store, clock: FakeClock
    ) -> None:
        own = {"tier": Tier.SELF, "required_role": None, "on_behalf_of": "U_ALICE", "trustable": False}
        a = make_approval(now=clock.now(), key="own").model_copy(update=own)
        await store.approvals.create(a)
        assert (await store.approvals.get(a.id)).on_behalf_of == "U_ALICE"
        for reviewer, roles in (("U_SUPPORT1", SUPPORT), ("U_BOB", frozenset[str]())):
            with pytest.raises(DecisionRefused) as refused:  # a role, or none, is no one's own
                await store.approvals.decide(cmd(a, reviewer, roles=roles), now=clock.now())
            assert refused.value.code is ErrorCode.NOT_ELIGIBLE
        nobody = make_approval(now=clock.now(), key="nobody").model_copy(update={**own, "on_behalf_of": None})
        await store.approvals.create(nobody)
        with pytest.raises(DecisionRefused):  # a self approval with no person is nobody's (fail closed)
            await store.approvals.decide(cmd(nobody, "U_ALICE", roles=frozenset()), now=clock.now())
        done = await store.approvals.decide(cmd(a, "U_ALICE", roles=frozenset()), now=clock.now())
        assert done.status is Status.APPROVED and [d.reviewer for d in done.decisions] == ["U_ALICE"]
        [decided] = [e for e in await store.audit.entries(approval_id=a.id) if e.event == "decided"]
        assert decided.detail.endswith("; basis self")
        # Raised to approve, the person it acts for is one of its askers: no reviewer of it (separation of duties).
        raised = make_approval(now=clock.now(), key="raised").model_copy(update={"on_behalf_of": "U_SUPPORT2"})
        await store.approvals.create(raised)
        with pytest.raises(DecisionRefused) as sod:
            await store.approvals.decide(cmd(raised, "U_SUPPORT2"), now=clock.now())
        assert sod.value.code is ErrorCode.SELF_APPROVAL
        assert (await store.approvals.decide(cmd(raised, "U_SUPPORT1"), now=clock.now())).status is Status.APPROVED

    async def test_an_approval_handed_on_may_be_decided_and_listed_by_its_backup_role(
        self, store: Store, clock: FakeClock
    ) -> None:
        start = clock.now()
        a = make_approval(now=start, key="handed", quorum=2).model_copy(
            update={"backup_role": "finance", "hand_on_at": start + 100}
        )
        await store.approvals.create(a)
        finance = frozenset({"finance"})

        async def listed(now: float | None) -> list[str]:
            found = await store.approvals.list_pending(roles=["finance"], now=now, order="rank")
            return [x.id for x in found.items]

        assert await listed(None) == [] and await listed(start + 99) == [] and await listed(start + 100) == [a.id]
        assert await store.approvals.count_pending(roles=["finance"], now=start + 100) == 1
        assert await store.approvals.count_pending(roles=["finance"], now=start + 99) == 0
        aged = await store.approvals.list_pending(roles=["finance"], now=start + 100)
        assert [x.id for x in aged.items] == [a.id]  # in age order too
        with pytest.raises(DecisionRefused) as early:  # not yet handed on: finance may not decide it
            await store.approvals.decide(cmd(a, "U_FIN1", roles=finance), now=start + 99)
        assert early.value.code is ErrorCode.NOT_ELIGIBLE
        first = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=start + 50)  # a vote cast before still counts
        done = await store.approvals.decide(cmd(first, "U_FIN1", roles=finance), now=start + 100)
        assert done.status is Status.APPROVED and [d.reviewer for d in done.decisions] == ["U_SUPPORT1", "U_FIN1"]
        assert await listed(start + 200) == []  # decided: off the backup role's lists too
        assert await store.approvals.count_pending(roles=["finance"], now=start + 200) == 0

    async def test_transitions_follow_the_table(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        with pytest.raises(IllegalTransition) as err:
            await store.approvals.transition(
                a.id, target=Status.EXECUTED, expected_version=1, actor="runner", now=clock.now()
            )
        assert err.value.context["current"] == "pending" and err.value.context["target"] == "executed"
        ok = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        with pytest.raises(EngineError) as stale:
            await store.approvals.transition(
                a.id, target=Status.EXECUTING, expected_version=1, actor="runner", now=clock.now()
            )
        assert stale.value.code is ErrorCode.STALE_VERSION
        ex = await store.approvals.transition(
            a.id, target=Status.EXECUTING, expected_version=ok.version, actor="runner", now=clock.now()
        )
        done = await store.approvals.transition(
            a.id,
            target=Status.EXECUTED,
            expected_version=ex.version,
            actor="runner",
            now=clock.now(),
            reason="refund R-1",
        )
        assert done.status is Status.EXECUTED and done.version == 4
        assert [e.event for e in await store.audit.entries(approval_id=a.id)] == [
            "created",
            "decided",
            "executing",
            "executed",
        ]
        cancel = make_approval(now=clock.now(), key="c")
        await store.approvals.create(cancel)
        out = await store.approvals.transition(
            cancel.id,
            target=Status.CANCELLED,
            expected_version=None,
            actor="U_SUPPORT1",
            now=clock.now(),
            reason="customer withdrew",
        )
        assert out.status is Status.CANCELLED and out.reason == "customer withdrew"

    async def test_an_approved_approval_whose_consequence_drifted_is_superseded_or_expired(
        self, store: Store, clock: FakeClock
    ) -> None:
        # Asked again (superseded, naming the new one) or expired as drifted, bound to its version, not its deadline.
        for target, by in ((Status.SUPERSEDED, "apr_AGAIN00001"), (Status.EXPIRED, None)):
            a = make_approval(now=clock.now(), key=str(target), ttl=600)
            await store.approvals.create(a)
            ok = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
            moved = await store.approvals.transition(
                a.id, target=target, expected_version=ok.version, actor="w", now=clock.now(), reason="drifted: x",
                superseded_by=by,
            )  # fmt: skip
            got = await store.approvals.get(a.id)
            assert moved == got and (got.status, got.superseded_by, got.reason) == (target, by, "drifted: x")
            with pytest.raises(IllegalTransition):  # and nothing moves it on: it never runs
                await store.approvals.transition(
                    a.id, target=Status.EXECUTING, expected_version=got.version, actor="w", now=clock.now()
                )

    async def test_waiters_wake_on_a_decision_and_time_out_otherwise(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        idle = await store.approvals.wait_changed(a.id, after_version=a.version, timeout=0.05)
        assert idle == a
        waiter = asyncio.create_task(store.approvals.wait_changed(a.id, after_version=a.version, timeout=30))
        cancelled = asyncio.create_task(store.approvals.wait_changed(a.id, after_version=a.version, timeout=30))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        decided = await store.approvals.decide(
            cmd(a, "U_SUPPORT1"), now=clock.now()
        )  # a cancelled wait changed nothing
        woke = await asyncio.wait_for(waiter, timeout=5)
        assert woke == decided and woke.status is Status.APPROVED
