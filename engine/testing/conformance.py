"""The store conformance suite. Every backend passes it; so can yours.

Usage in a pytest module::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        async def store(self):
            s = MyStore(...)
            yield s
            await s.close()

        @pytest.fixture
        def clock(self):
            return FakeClock()
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.domain.decide import DecideCommand
from engine.domain.models import Approval, DecisionKind, Reviewer, Status
from engine.domain.records import AuditEntry, ClaimState, MessageRef
from engine.errors import ClaimRefused, DecisionRefused, EngineError, ErrorCode, IllegalTransition, NotFound
from engine.ports import Store
from engine.testing.clock import FakeClock
from engine.testing.factories import make_approval

__all__ = ["StoreConformance"]

SUPPORT = frozenset({"support"})


def cmd(
    a: Approval,
    reviewer: str,
    kind: DecisionKind = DecisionKind.APPROVE,
    *,
    roles: frozenset[str] = SUPPORT,
    **kw: Any,
) -> DecideCommand:
    fields: dict[str, Any] = {"expected_version": a.version, "expected_hash": a.action_hash, **kw}
    return DecideCommand(approval_id=a.id, reviewer=Reviewer(id=reviewer, roles=roles), kind=kind, **fields)


class StoreConformance:
    """Behaviour every :class:`engine.ports.Store` must show."""

    # -- create / get -------------------------------------------------------------------------------------
    async def test_create_get_roundtrip_keeps_args_exact(self, store: Store, clock: FakeClock) -> None:
        args = {
            "amount": 12345678.123456789,
            "note": "Grüße 👋🏽 <!channel>",
            "nested": {"b": [1, 2.5, None]},
        }
        a = make_approval(now=clock.now(), args=args, evidence="customer says hi")
        stored, created = await store.create_approval(a)
        assert created and stored == a
        got = await store.get_approval(a.id)
        assert got == a
        assert got.args["amount"] == 12345678.123456789

    async def test_create_is_idempotent_on_dedupe_key(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        approved = await store.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        again, created = await store.create_approval(make_approval(now=clock.advance(5)))
        assert not created
        assert again == approved

    async def test_unknown_id_is_not_found_and_writes_nothing(self, store: Store, clock: FakeClock) -> None:
        with pytest.raises(NotFound) as err:
            await store.get_approval("apr_NOPE")
        assert err.value.code is ErrorCode.NOT_FOUND
        ghost = make_approval(now=clock.now(), key="ghost")
        with pytest.raises(NotFound):
            await store.decide(cmd(ghost, "U_SUPPORT1"), now=clock.now())
        with pytest.raises(NotFound):
            await store.get_approval(ghost.id)
        assert await store.audit(approval_id=ghost.id) == []

    # -- decide -------------------------------------------------------------------------------------------
    async def test_approve_records_once_and_audits(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        out = await store.decide(cmd(a, "U_SUPPORT1", via="cli"), now=clock.advance(1))
        assert out.status is Status.APPROVED and out.version == 2
        assert [(d.reviewer, d.kind, d.via) for d in out.decisions] == [("U_SUPPORT1", DecisionKind.APPROVE, "cli")]
        log = await store.audit(approval_id=a.id)
        assert [(e.event, e.actor, e.outcome, e.version) for e in log] == [
            ("created", "agent:riley", "ok", 1),
            ("decided", "U_SUPPORT1", "ok", 2),
        ]

    async def test_200_concurrent_deciders_exactly_one_wins(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        reviewers = [f"U_R{i:03d}" for i in range(200)]
        results = await asyncio.gather(
            *(store.decide(cmd(a, r), now=clock.now()) for r in reviewers), return_exceptions=True
        )
        wins = [r for r in results if isinstance(r, Approval)]
        losses = [r for r in results if isinstance(r, DecisionRefused)]
        assert len(wins) == 1 and len(losses) == 199
        winner = wins[0].decisions[0].reviewer
        assert all(e.code is ErrorCode.ALREADY_DECIDED and e.context["winner"] == winner for e in losses)
        assert all(winner in e.message for e in losses)
        final = await store.get_approval(a.id)
        assert final.version == 2 and len(final.decisions) == 1
        log = await store.audit(approval_id=a.id)
        assert sum(e.event == "decided" for e in log) == 1 and sum(e.event == "refused" for e in log) == 199

    async def test_approve_racing_reject_gives_one_terminal_state(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        calls = []
        for i in range(50):
            kind = DecisionKind.APPROVE if i % 2 else DecisionKind.REJECT
            calls.append(store.decide(cmd(a, f"U_X{i}", kind, reason="no"), now=clock.now()))
        results = await asyncio.gather(*calls, return_exceptions=True)
        wins = [r for r in results if isinstance(r, Approval)]
        assert len(wins) == 1
        final = await store.get_approval(a.id)
        assert final.status in (Status.APPROVED, Status.REJECTED) and final == wins[0]

    @pytest.mark.parametrize("case", ["stale", "hash", "expired", "ineligible", "self", "duplicate", "trust"])
    async def test_refusals_change_nothing_and_are_audited(self, store: Store, clock: FakeClock, case: str) -> None:
        a = make_approval(
            now=clock.now(),
            quorum=2 if case == "duplicate" else 1,
            trustable=case != "trust",
            role="finance" if case == "duplicate" else "support",
        )
        await store.create_approval(a)
        roles = frozenset({"finance"}) if case == "duplicate" else SUPPORT
        if case == "duplicate":
            a = await store.decide(cmd(a, "U_FIN1", roles=roles), now=clock.now())
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
        before = await store.get_approval(a.id)
        with pytest.raises(DecisionRefused) as err:
            await store.decide(c, now=now)
        assert err.value.code is expected
        assert await store.get_approval(a.id) == before
        last = (await store.audit(approval_id=a.id))[-1]
        assert (last.event, last.outcome, last.actor) == ("refused", str(expected), c.reviewer.id)

    async def test_quorum_needs_distinct_approvers(self, store: Store, clock: FakeClock) -> None:
        fin = frozenset({"finance"})
        a = make_approval(now=clock.now(), role="finance", quorum=2, trustable=False)
        await store.create_approval(a)
        one = await store.decide(cmd(a, "U_FIN1", roles=fin), now=clock.now())
        assert one.status is Status.PENDING and one.version == 2 and one.approvers == ("U_FIN1",)
        two = await store.decide(cmd(one, "U_FIN2", roles=fin), now=clock.now())
        assert two.status is Status.APPROVED and two.approvers == ("U_FIN1", "U_FIN2")

    async def test_reject_modify_and_supersede(self, store: Store, clock: FakeClock) -> None:
        r = make_approval(now=clock.now(), key="r")
        await store.create_approval(r)
        rejected = await store.decide(cmd(r, "U_SUPPORT1", DecisionKind.REJECT, reason="wrong order"), now=clock.now())
        assert rejected.status is Status.REJECTED and rejected.reason == "wrong order"
        m = make_approval(now=clock.now(), key="m")
        await store.create_approval(m)
        new_args = {"order_id": "78291", "amount": 40.0}
        mod = await store.decide(cmd(m, "U_SUPPORT1", DecisionKind.MODIFY, args=new_args), now=clock.now())
        assert mod.status is Status.APPROVED and mod.execute_args == new_args and mod.args == m.args
        q = make_approval(now=clock.now(), key="q", quorum=2)
        await store.create_approval(q)
        with pytest.raises(DecisionRefused) as err:
            await store.decide(cmd(q, "U_SUPPORT1", DecisionKind.MODIFY, args=new_args), now=clock.now())
        assert err.value.code is ErrorCode.INVALID_INPUT
        sup = await store.decide(
            cmd(q, "U_SUPPORT1", DecisionKind.MODIFY, args=new_args, supersede_with="apr_NEW"),
            now=clock.now(),
        )
        assert sup.status is Status.SUPERSEDED and sup.superseded_by == "apr_NEW"

    # -- expiry -------------------------------------------------------------------------------------------
    async def test_expiry_is_recorded_as_expiry(self, store: Store, clock: FakeClock) -> None:
        due = make_approval(now=clock.now(), key="due", ttl=60)
        later = make_approval(now=clock.now(), key="later", ttl=600)
        for a in (due, later):
            await store.create_approval(a)
        assert await store.expire_due(now=clock.advance(30)) == []
        expired = await store.expire_due(now=clock.advance(31))
        assert [a.id for a in expired] == [due.id]
        got = await store.get_approval(due.id)
        assert got.status is Status.EXPIRED and got.decisions == () and got.version == 2
        assert (await store.audit(approval_id=due.id))[-1].event == "expired"
        assert (await store.get_approval(later.id)).status is Status.PENDING
        with pytest.raises(DecisionRefused) as err:
            await store.decide(cmd(due, "U_SUPPORT1"), now=clock.now())
        assert err.value.code is ErrorCode.EXPIRED
        assert await store.expire_due(now=clock.now()) == []

    async def test_decision_racing_expiry_exactly_one_wins(self, store: Store, clock: FakeClock) -> None:
        for i in range(20):
            a = make_approval(now=clock.now(), key=f"race{i}", ttl=10)
            await store.create_approval(a)
            decided, expired = await asyncio.gather(
                store.decide(cmd(a, "U_SUPPORT1"), now=a.expires_at - 0.001),
                store.expire_due(now=a.expires_at + 0.001),
                return_exceptions=True,
            )
            final = await store.get_approval(a.id)
            if isinstance(decided, Approval):
                assert final.status is Status.APPROVED and expired == []
            else:
                assert isinstance(decided, DecisionRefused) and decided.code is ErrorCode.EXPIRED
                assert final.status is Status.EXPIRED and [x.id for x in expired] == [a.id]  # type: ignore[union-attr]

    # -- listing ------------------------------------------------------------------------------------------
    async def test_list_pending_pages_filters_and_skips_decided(self, store: Store, clock: FakeClock) -> None:
        made = []
        for i in range(120):
            role = "finance" if i % 3 == 0 else "support"
            a = make_approval(
                now=clock.advance(1),
                key=f"p{i}",
                role=role,
                requester="U_SUPPORT2" if i % 10 == 0 else "agent:riley",
            )
            await store.create_approval(a)
            made.append(a)
        await store.decide(cmd(made[1], "U_SUPPORT1"), now=clock.now())
        seen, cursor = [], None
        while True:
            page = await store.list_pending(limit=50, cursor=cursor)
            seen += [a.id for a in page.items]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert seen == [a.id for i, a in enumerate(made) if i != 1]
        support = await store.list_pending(roles=["support"], exclude_requester="U_SUPPORT2", limit=200)
        expected = [a.id for i, a in enumerate(made) if i % 3 and i % 10 and i != 1]
        assert [a.id for a in support.items] == expected and support.cursor is None
        with pytest.raises(EngineError):
            await store.list_pending(cursor="garbage-cursor")

    # -- transitions and execution ------------------------------------------------------------------------
    async def test_transitions_follow_the_table(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        with pytest.raises(IllegalTransition) as err:
            await store.transition(a.id, target=Status.EXECUTED, expected_version=1, actor="runner", now=clock.now())
        assert err.value.context["current"] == "pending" and err.value.context["target"] == "executed"
        ok = await store.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        with pytest.raises(EngineError) as stale:
            await store.transition(a.id, target=Status.EXECUTING, expected_version=1, actor="runner", now=clock.now())
        assert stale.value.code is ErrorCode.STALE_VERSION
        ex = await store.transition(
            a.id, target=Status.EXECUTING, expected_version=ok.version, actor="runner", now=clock.now()
        )
        done = await store.transition(
            a.id,
            target=Status.EXECUTED,
            expected_version=ex.version,
            actor="runner",
            now=clock.now(),
            reason="refund R-1",
        )
        assert done.status is Status.EXECUTED and done.version == 4
        assert [e.event for e in await store.audit(approval_id=a.id)] == [
            "created",
            "decided",
            "executing",
            "executed",
        ]
        cancel = make_approval(now=clock.now(), key="c")
        await store.create_approval(cancel)
        out = await store.transition(
            cancel.id,
            target=Status.CANCELLED,
            expected_version=None,
            actor="U_SUPPORT1",
            now=clock.now(),
            reason="customer withdrew",
        )
        assert out.status is Status.CANCELLED and out.reason == "customer withdrew"

    async def test_50_concurrent_claimants_one_wins_and_retry_replays(self, store: Store, clock: FakeClock) -> None:
        results = await asyncio.gather(
            *(store.claim("idem-1", action_hash="h1", holder=f"w{i}", now=clock.now(), lease=30) for i in range(50)),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException) and r.acquired]
        refused = [r for r in results if isinstance(r, ClaimRefused)]
        assert len(won) == 1 and len(refused) == 49
        assert all(r.code is ErrorCode.CLAIM_IN_PROGRESS for r in refused)
        w = won[0]
        done = await store.record_outcome(
            "idem-1",
            holder=w.holder,
            attempt=w.attempt,
            ok=True,
            result={"refund_id": "R-1"},
            now=clock.now(),
        )
        assert done.state is ClaimState.SUCCEEDED
        replay = await store.claim("idem-1", action_hash="h1", holder="late", now=clock.now(), lease=30)
        assert not replay.acquired and replay.result == {"refund_id": "R-1"} and replay.holder == w.holder
        with pytest.raises(ClaimRefused) as err:
            await store.claim("idem-1", action_hash="other", holder="x", now=clock.now(), lease=30)
        assert err.value.code is ErrorCode.CLAIM_HASH_MISMATCH

    async def test_dead_holder_is_recovered_once_and_fenced(self, store: Store, clock: FakeClock) -> None:
        first = await store.claim("idem-2", action_hash="h", holder="dead", now=clock.now(), lease=30)
        assert first.acquired and first.attempt == 1
        clock.advance(31)
        results = await asyncio.gather(
            *(store.claim("idem-2", action_hash="h", holder=f"r{i}", now=clock.now(), lease=30) for i in range(20)),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException) and r.acquired]
        assert len(won) == 1 and won[0].attempt == 2 and won[0].recovered
        with pytest.raises(ClaimRefused) as err:
            await store.record_outcome("idem-2", holder="dead", attempt=1, ok=True, result={}, now=clock.now())
        assert err.value.code is ErrorCode.CLAIM_FENCED
        out = await store.record_outcome(
            "idem-2", holder=won[0].holder, attempt=2, ok=False, result={"error": "x"}, now=clock.now()
        )
        assert out.state is ClaimState.FAILED
        assert not (await store.claim("idem-2", action_hash="h", holder="z", now=clock.now(), lease=30)).acquired
        retry = await store.claim("idem-2", action_hash="h", holder="z", now=clock.now(), lease=30, retry_failed=True)
        assert retry.acquired and retry.attempt == 3 and not retry.recovered
        assert (await store.get_claim("idem-2")) is not None and await store.get_claim("nope") is None

    # -- runs, trust, windows, audit, messages ------------------------------------------------------------
    async def test_checkpoints_are_compare_and_swap(self, store: Store, clock: FakeClock) -> None:
        assert await store.load_checkpoint("run1") is None
        v1 = await store.save_checkpoint("run1", {"step": 1, "x": 1.5}, expected_version=0, now=clock.now())
        assert v1 == 1
        with pytest.raises(EngineError) as err:
            await store.save_checkpoint("run1", {"step": 9}, expected_version=0, now=clock.now())
        assert err.value.code is ErrorCode.STALE_VERSION
        assert await store.save_checkpoint("run1", {"step": 2}, expected_version=1, now=clock.now()) == 2
        assert await store.load_checkpoint("run1") == ({"step": 2}, 2)
        await store.save_checkpoint("run2", {"status": "paused"}, expected_version=0, now=clock.now())
        await store.save_checkpoint("run3", {"status": "paused"}, expected_version=0, now=clock.now())
        await store.save_checkpoint("run3", {"status": "paused", "x": 1}, expected_version=1, now=clock.now())
        assert sorted(await store.paused_runs()) == ["run2", "run3"]
        await store.save_checkpoint("run2", {"status": "completed"}, expected_version=1, now=clock.now())
        assert await store.paused_runs() == ["run3"]

    async def test_trust_grants_expire_and_revoke(self, store: Store, clock: FakeClock) -> None:
        await store.grant_trust("s1", "refund", until=clock.now() + 60, by="U_SUPPORT1", now=clock.now())
        await store.grant_trust("s1", "email", until=clock.now() + 600, by="U_SUPPORT1", now=clock.now())
        assert [g.tool for g in await store.list_trust("s1", now=clock.now())] == ["email", "refund"]
        assert await store.list_trust("s2", now=clock.now()) == []
        await store.grant_trust("s2", "email", until=clock.now() + 60, by="U_SUPPORT2", now=clock.now())
        assert [(g.session_id, g.tool) for g in await store.list_all_trust(now=clock.now())] == [
            ("s1", "email"),
            ("s1", "refund"),
            ("s2", "email"),
        ]
        clock.advance(61)
        assert [g.tool for g in await store.list_trust("s1", now=clock.now())] == ["email"]
        assert await store.revoke_trust("s1", "email", by="U_SUPPORT2", now=clock.now())
        assert not await store.revoke_trust("s1", "email", by="U_SUPPORT2", now=clock.now())
        assert await store.list_trust("s1", now=clock.now()) == []
        assert [(g.session_id, g.tool) for g in await store.list_all_trust(now=clock.now())] == []

    async def test_rolling_windows_count_and_sum(self, store: Store, clock: FakeClock) -> None:
        key = "split:cust-1"
        for i in range(3):
            prior = await store.window_add(key, amount=49.0, now=clock.advance(600), window=86400, event_id=f"e{i}")
            assert (prior.count, prior.total) == (i, 49.0 * i)
        stats = await store.window_stats(key, now=clock.now(), window=86400)
        assert (stats.count, stats.total) == (3, 147.0)
        again = await store.window_add(key, amount=49.0, now=clock.now(), window=86400, event_id="e2")
        assert (again.count, again.total) == (2, 98.0)  # re-adding an event neither counts it nor doubles it
        assert (await store.window_stats(key, now=clock.now(), window=86400)).count == 3
        clock.advance(86400 - 1200 + 1)
        stats = await store.window_stats(key, now=clock.now(), window=86400)
        assert (stats.count, stats.total) == (2, 98.0)

    async def test_audit_is_ordered_and_messages_map_both_ways(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        await store.append_audit(AuditEntry(at=clock.advance(1), actor="runner", event="note", approval_id=a.id))
        await store.append_audit(AuditEntry(at=clock.advance(1), actor="cli", event="auto_approve", detail="ci"))
        everything = await store.audit()
        assert [e.event for e in everything][-3:] == ["created", "note", "auto_approve"]
        ref = MessageRef(channel="C123", ts="1700000000.000100")
        assert await store.get_message(a.id) is None
        await store.set_message(a.id, ref)
        assert await store.get_message(a.id) == ref
        assert await store.approval_for_message(ref) == a.id
        assert await store.approval_for_message(MessageRef(channel="C123", ts="1")) is None

    # -- waiting --------------------------------------------------------------------------------------
    async def test_waiters_wake_on_a_decision_and_time_out_otherwise(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.create_approval(a)
        idle = await store.wait_changed(a.id, after_version=a.version, timeout=0.05)
        assert idle == a
        waiter = asyncio.create_task(store.wait_changed(a.id, after_version=a.version, timeout=30))
        cancelled = asyncio.create_task(store.wait_changed(a.id, after_version=a.version, timeout=30))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        decided = await store.decide(cmd(a, "U_SUPPORT1"), now=clock.now())  # a cancelled wait changed nothing
        woke = await asyncio.wait_for(waiter, timeout=5)
        assert woke == decided and woke.status is Status.APPROVED

    # -- jobs -----------------------------------------------------------------------------------------
    async def test_jobs_are_delivered_until_acknowledged(self, store: Store, clock: FakeClock) -> None:
        first = await store.enqueue_job("resume", {"session_id": "s1"}, now=clock.now())
        other = await store.enqueue_job("card", {"approval_id": "a1"}, now=clock.now())
        second = await store.enqueue_job("resume", {"session_id": "s2"}, now=clock.now())
        got = await store.claim_jobs("worker-a", kind="resume", limit=10, now=clock.now(), lease=60)
        assert [(j.id, j.kind, j.payload["session_id"]) for j in got] == [
            (first, "resume", "s1"),
            (second, "resume", "s2"),
        ]
        assert await store.claim_jobs("worker-b", kind="resume", limit=10, now=clock.now(), lease=60) == []
        cards = await store.claim_jobs("worker-b", kind="card", limit=10, now=clock.now(), lease=60)
        assert [(j.id, j.payload) for j in cards] == [(other, {"approval_id": "a1"})]
        await store.ack_job(other)
        await store.ack_job(first)
        # worker-a "crashed" holding s2: with its lease over, another worker takes it; s1 never comes back.
        clock.advance(61)
        again = await store.claim_jobs("worker-b", kind="resume", limit=10, now=clock.now(), lease=0)
        assert [j.payload["session_id"] for j in again] == ["s2"]
        await store.ack_job(second)
        assert await store.claim_jobs("worker-c", kind="resume", limit=10, now=clock.now(), lease=0) == []
        assert await store.claim_jobs("worker-c", kind="card", limit=10, now=clock.now(), lease=0) == []
