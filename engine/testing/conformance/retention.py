"""Conformance for retention (:class:`hitl.engine.ports.Purger`): what ended goes after the records horizon, what may
still be read stays, audit chains go after the audit horizon, and the trail still verifies.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.records import AuditEntry, MessageRef
from hitl.engine.domain.retention import DAY, PURGE_EVENT, Purged, Retention
from hitl.engine.errors import NotFound
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.conformance.trust import grant
from hitl.engine.testing.factories import make_approval

__all__ = ["RetentionConformance"]

MONTH = Retention(records=30 * DAY, audit=400 * DAY)


async def _rejected(store: Store, clock: FakeClock, session: str, key: str = "k") -> str:
    a, _ = await store.approvals.create(make_approval(now=clock.now(), session_id=session, key=key))
    await store.approvals.decide(cmd(a, "U_SUPPORT1", DecisionKind.REJECT, reason="no"), now=clock.advance(1))
    return a.id


async def _run(store: Store, clock: FakeClock, run_id: str, status: str) -> None:
    version = await store.runs.save(run_id, {"status": "running"}, expected_version=0, now=clock.now())
    if status != "running":
        await store.runs.save(run_id, {"status": status}, expected_version=version, now=clock.now())


async def _purge(store: Store, now: float) -> Purged:
    """Purge, after checking that a dry run says exactly what the purge removes, and removes nothing itself."""
    trail = await store.audit.entries(limit=100_000)
    preview = await store.purger.due(MONTH, now=now)
    assert await store.audit.entries(limit=100_000) == trail
    done = await store.purger.purge(MONTH, now=now)
    assert preview == done
    return done


def _counts(p: Purged) -> dict[str, int]:
    """What a purge removed, but done jobs (Redis deletes a job when it is acknowledged; SQLite keeps it till now)."""
    return {k: v for k, v in p.model_dump().items() if k != "jobs" and v}


class RetentionConformance:
    """What every store must do here."""

    async def test_what_ended_goes_after_the_horizon_and_what_may_be_read_stays(
        self, store: Store, clock: FakeClock
    ) -> None:
        t0 = clock.now()
        done = await _rejected(store, clock, "s-done")
        waited = await _rejected(store, clock, "s-live")  # its run still waits: it may read this approval
        pending, _ = await store.approvals.create(make_approval(now=t0, session_id="s-slow", ttl=90 * DAY))
        await _run(store, clock, "s-done", "completed")
        await _run(store, clock, "s-live", "paused")
        ref = MessageRef(channel="C1", ts="1800000000.000100")
        await store.messages.set(done, ref)
        await store.trust.grant(grant("s-done", "refund", until=t0 + 60), now=t0)
        finished = await store.ledger.claim("call:done", action_hash="h", holder="w", now=clock.now(), lease=5)
        await store.ledger.record_outcome(
            "call:done", holder="w", attempt=finished.attempt, ok=True, result={"ok": 1}, now=clock.now()
        )
        await store.ledger.claim("call:running", action_hash="h", holder="w", now=clock.now(), lease=5)
        await store.jobs.enqueue("resume", {"n": 1}, now=t0)
        await store.jobs.enqueue("resume", {"n": 2}, now=t0)
        jobs = await store.jobs.claim("c1", kind="resume", limit=1, now=t0, lease=30)
        await store.jobs.ack(jobs[0].id)  # done: it may go; the other is still to do and stays
        entries = len(await store.audit.entries())

        clock.set(t0 + 29 * DAY)
        assert (await _purge(store, clock.now())).total == 0
        assert len(await store.audit.entries()) == entries  # nothing removed: nothing written

        clock.set(t0 + 30 * DAY + 100)
        purged = await _purge(store, clock.now())
        assert _counts(purged) == {"runs": 1, "approvals": 1, "trust": 1}
        with pytest.raises(NotFound):
            await store.approvals.get(done)
        assert (await store.approvals.get(waited)).id == waited
        assert (await store.approvals.get(pending.id)).id == pending.id
        assert await store.runs.load("s-done") is None and await store.runs.load("s-live") is not None
        assert await store.messages.get(done) is None and await store.messages.approval_for(ref) is None
        assert done not in [a.id for a in (await store.approvals.list_recent(limit=50)).items]
        for where in (ApprovalFilter(reviewer="U_SUPPORT1"), ApprovalFilter(status="decided", tool="refund")):
            for _ in range(2):  # read twice: a store that repairs its index on the first read lists the same after
                listed = [a.id for a in (await store.approvals.list_matching(where, limit=50)).items]
                assert listed == [waited], where  # the purged one gone from the filtered listing too
        assert await store.ledger.get("call:done") is not None  # kept a day longer than what it served
        assert [e.event for e in await store.audit.entries(approval_id=done)] == ["created", "decided"]
        left = await store.jobs.claim("c2", kind="resume", limit=5, now=clock.now(), lease=30)
        assert [j.payload for j in left] == [{"n": 2}]
        last = (await store.audit.entries())[-1]
        assert last.event == PURGE_EVENT and last.approval_id is None
        assert json.loads(last.detail)["approvals"] == 1
        assert (await store.audit.verify())[1] is None

        clock.advance(DAY)
        assert _counts(await _purge(store, clock.now())) == {"claims": 1}
        assert await store.ledger.get("call:done") is None
        assert await store.ledger.get("call:running") is not None  # never finished: never removed
        assert (await _purge(store, clock.now())).total == 0
        assert (await store.audit.verify())[1] is None

    async def test_audit_chains_go_after_the_audit_horizon_and_the_trail_still_verifies(
        self, store: Store, clock: FakeClock
    ) -> None:
        t0 = clock.now()
        await store.audit.append(AuditEntry(at=t0, actor="cli", event="forced_resume", detail="old"))
        gone = await _rejected(store, clock, "s-old")
        kept = await _rejected(store, clock, "s-old", key="other")
        clock.set(t0 + 31 * DAY)
        assert _counts(await _purge(store, clock.now())) == {"approvals": 2}
        await store.audit.append(AuditEntry(at=clock.now(), actor="cli", event="forced_resume", detail="new"))
        # ``kept``'s chain has a late entry: a chain goes only when all of it is older than the horizon.
        await store.audit.append(AuditEntry(at=t0 + 200 * DAY, actor="w", event="note", approval_id=kept))

        clock.set(t0 + 401 * DAY)
        purged = await _purge(store, clock.now())
        assert _counts(purged) == {"chains": 1, "audit_entries": 3}  # gone's two entries and the old run-level one
        assert await store.audit.entries(approval_id=gone) == []
        assert [e.event for e in await store.audit.entries(approval_id=kept)] == ["created", "decided", "note"]
        run_level = [e for e in await store.audit.entries() if e.approval_id is None]
        assert [e.event for e in run_level] == [PURGE_EVENT, "forced_resume", PURGE_EVENT]
        checked, broken = await store.audit.verify()
        assert broken is None and checked == 6

        clock.set(t0 + 900 * DAY)  # everything is old now, the purge entries too: the chain starts at the new one
        purged = await _purge(store, clock.now())
        assert _counts(purged) == {"chains": 1, "audit_entries": 6}
        assert [e.event for e in await store.audit.entries()] == [PURGE_EVENT]
        assert (await store.audit.verify()) == (1, None)

    async def test_purges_page_by_limit_and_race_safely(self, store: Store, clock: FakeClock) -> None:
        t0 = clock.now()
        ids = [await _rejected(store, clock, f"s{i}") for i in range(5)]
        clock.set(t0 + 31 * DAY)
        assert [(await store.purger.purge(MONTH, now=clock.now(), limit=2)).approvals for _ in range(4)] == [
            2,
            2,
            1,
            0,
        ]
        for aid in ids:
            with pytest.raises(NotFound):
                await store.approvals.get(aid)
        more = [await _rejected(store, clock, f"t{i}") for i in range(6)]
        clock.set(t0 + 62 * DAY)
        both = await asyncio.gather(*(store.purger.purge(MONTH, now=clock.now()) for _ in range(2)))
        assert sum(p.approvals for p in both) == len(more)
        assert (await store.audit.verify())[1] is None

    async def test_never_keeps_everything(self, store: Store, clock: FakeClock) -> None:
        t0 = clock.now()
        aid = await _rejected(store, clock, "s-forever")
        await _run(store, clock, "s-forever", "completed")
        clock.set(t0 + 5000 * DAY)
        assert (await store.purger.purge(Retention(records=None, audit=None), now=clock.now())).total == 0
        assert (await store.approvals.get(aid)).id == aid and await store.runs.load("s-forever") is not None
