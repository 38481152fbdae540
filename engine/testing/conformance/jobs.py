"""Conformance for the durable job queue.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.ports import Store

__all__ = ["JobsConformance"]


class JobsConformance:
    """What every store must do here."""

    async def test_jobs_are_delivered_until_acknowledged(self, store: Store, clock: FakeClock) -> None:
        first = await store.jobs.enqueue("resume", {"session_id": "s1"}, now=clock.now())
        other = await store.jobs.enqueue("card", {"approval_id": "a1"}, now=clock.now())
        second = await store.jobs.enqueue("resume", {"session_id": "s2"}, now=clock.now())
        got = await store.jobs.claim("worker-a", kind="resume", limit=10, now=clock.now(), lease=60)
        assert [(j.id, j.kind, j.payload["session_id"]) for j in got] == [
            (first, "resume", "s1"),
            (second, "resume", "s2"),
        ]
        assert await store.jobs.claim("worker-b", kind="resume", limit=10, now=clock.now(), lease=60) == []
        cards = await store.jobs.claim("worker-b", kind="card", limit=10, now=clock.now(), lease=60)
        assert [(j.id, j.payload) for j in cards] == [(other, {"approval_id": "a1"})]
        await store.jobs.ack(other)
        await store.jobs.ack(first)
        # worker-a "crashed" holding s2: with its lease over, another worker takes it; s1 never comes back.
        clock.advance(61)
        again = await store.jobs.claim("worker-b", kind="resume", limit=10, now=clock.now(), lease=0)
        assert [j.payload["session_id"] for j in again] == ["s2"]
        await store.jobs.ack(second)
        assert await store.jobs.claim("worker-c", kind="resume", limit=10, now=clock.now(), lease=0) == []
        assert await store.jobs.claim("worker-c", kind="card", limit=10, now=clock.now(), lease=0) == []

    async def test_settle_marks_done_the_jobs_of_one_approval(self, store: Store, clock: FakeClock) -> None:
        mine = await store.jobs.enqueue("resume", {"session_id": "s1", "approval_id": "apr_1"}, now=clock.now())
        await store.jobs.enqueue("resume", {"session_id": "s2", "approval_id": "apr_2"}, now=clock.now())
        await store.jobs.enqueue("card", {"approval_id": "apr_1"}, now=clock.now())
        assert mine
        assert await store.jobs.settle("resume", approval_id="apr_1") == 1
        assert await store.jobs.settle("resume", approval_id="apr_1") == 0  # already settled
        left = await store.jobs.claim("w", kind="resume", limit=10, now=clock.now(), lease=60)
        assert [j.payload["approval_id"] for j in left] == ["apr_2"]
        cards = await store.jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=60)
        assert [j.payload for j in cards] == [{"approval_id": "apr_1"}]  # another kind: untouched

    async def test_a_batch_is_acknowledged_in_one_call(self, store: Store, clock: FakeClock) -> None:
        ids = [await store.jobs.enqueue("card", {"approval_id": f"a{i}"}, now=clock.now()) for i in range(4)]
        resume = await store.jobs.enqueue("resume", {"session_id": "s1"}, now=clock.now())
        assert len(await store.jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=60)) == 4
        assert len(await store.jobs.claim("w", kind="resume", limit=10, now=clock.now(), lease=60)) == 1
        await store.jobs.ack()  # nothing to acknowledge: nothing changes
        await store.jobs.ack(ids[0], resume, ids[2], ids[3])  # several jobs, of two kinds, at once
        # The holder "crashed": past its lease, only the job it did not acknowledge is delivered again.
        clock.advance(61)
        again = await store.jobs.claim("w2", kind="card", limit=10, now=clock.now(), lease=0)
        assert [j.id for j in again] == [ids[1]]
        assert await store.jobs.claim("w2", kind="resume", limit=10, now=clock.now(), lease=0) == []
        await store.jobs.ack(ids[1])
        assert await store.jobs.claim("w3", kind="card", limit=10, now=clock.now(), lease=0) == []
