"""Redis-only behaviour: script reloading, hash tags, one round trip per decide."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status
from hitl.engine.domain.retention import DAY, Retention
from hitl.engine.errors import DecisionRefused, ErrorCode, StoreError
from hitl.engine.storage.redis import RedisStore
from hitl.engine.storage.redis.connection import key_id
from hitl.engine.storage.redis.part import RedisPart
from hitl.engine.testing.conformance import helpers
from hitl.testing import FakeClock, make_approval


async def test_scripts_reload_after_a_server_flush(redis_store: RedisStore, clock: FakeClock) -> None:
    a = make_approval(now=clock.now())
    await redis_store.conn.r.script_flush()
    await redis_store.approvals.create(a)
    await redis_store.conn.r.script_flush()
    cmd = helpers.cmd(a, "U1")
    assert (await redis_store.approvals.decide(cmd, now=clock.now())).status is Status.APPROVED
    await redis_store.conn.r.script_flush()
    assert await redis_store.approvals.expire_due(now=clock.now() + 10**6) == []


async def test_a_batch_of_thousands_of_jobs_on_two_streams_is_acknowledged_in_one_call(
    redis_store: RedisStore, clock: FakeClock
) -> None:
    """The acknowledgement script takes its ids a thousand at a time (Lua's unpack has a bound): a batch past that
    leaves no job behind on any stream, and claims nothing again once the lease runs out."""
    jobs = redis_store.jobs
    for i in range(2_500):
        await jobs.enqueue("card", {"n": i}, now=clock.now())
    await jobs.enqueue("fyi", {"n": -1}, now=clock.now())
    claimed = await jobs.claim("w", kind="card", limit=3_000, now=clock.now(), lease=30)
    claimed += await jobs.claim("w", kind="fyi", limit=10, now=clock.now(), lease=30)
    assert len(claimed) == 2_501
    await jobs.ack(*(j.id for j in claimed))
    for kind in ("card", "fyi"):
        key = redis_store.conn.jobs_key(kind)
        assert await redis_store.conn.r.xlen(key) == 0
        assert (await redis_store.conn.r.xpending(key, "hitl-workers"))["pending"] == 0  # acknowledged, not only gone
        assert await jobs.claim("w2", kind=kind, limit=10, now=clock.advance(3600), lease=30) == []


async def test_a_queue_whose_stream_was_deleted_makes_its_group_again_and_loses_no_new_job(
    redis_store: RedisStore, clock: FakeClock
) -> None:
    """A stream removed under a running consumer (FLUSHDB, a key deleted by hand) comes back without its consumer
    group: the next claim makes the group again, once, and takes the jobs queued since."""
    jobs = redis_store.jobs
    await jobs.enqueue("card", {"n": 1}, now=clock.now())
    first = await jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=30)
    await jobs.ack(*(j.id for j in first))
    await redis_store.conn.r.delete(redis_store.conn.jobs_key("card"))
    await jobs.enqueue("card", {"n": 2}, now=clock.now())  # the stream again, with no group
    again = await jobs.claim("w", kind="card", limit=10, now=clock.now(), lease=30)
    assert [j.payload for j in again] == [{"n": 2}]


async def test_one_approvals_keys_share_a_hash_tag(redis_store: RedisStore, clock: FakeClock) -> None:
    a = make_approval(now=clock.now())
    await redis_store.approvals.create(a)
    keys = [k async for k in redis_store.conn.r.scan_iter(match=f"{redis_store.prefix}:{{{a.id}}}*")]
    assert len(keys) == 4  # hash, static document, audit list and its head
    assert {re.search(r"\{([^}]*)\}", k).group(1) for k in keys} == {a.id}  # type: ignore[union-attr]


async def test_retention_finds_runs_and_claims_an_older_hitl_wrote_without_its_indexes(redis_store: RedisStore) -> None:
    store = redis_store
    c = store.conn
    t0 = 1_800_000_000.0
    version = await store.runs.save("r-old", {"status": "running"}, expected_version=0, now=t0)
    await store.runs.save("r-old", {"status": "completed"}, expected_version=version, now=t0)
    await store.runs.save("r-live", {"status": "paused"}, expected_version=0, now=t0)
    claim = await store.ledger.claim("k:{braced}", action_hash="h", holder="w", now=t0, lease=5)
    await store.ledger.record_outcome("k:{braced}", holder="w", attempt=claim.attempt, ok=True, result={}, now=t0)
    await c.r.delete(c.ended_key, c.finished_claims_key)  # as an older hitl left them: no indexes
    horizon = Retention(records=30 * DAY, audit=400 * DAY)
    later = t0 + 40 * DAY
    assert (await store.purger.due(horizon, now=later)).model_dump(include={"runs", "claims"}) == {
        "runs": 1,
        "claims": 1,
    }
    done = await store.purger.purge(horizon, now=later)
    assert (done.runs, done.claims) == (1, 1)
    assert await store.runs.load("r-old") is None and await store.runs.load("r-live") is not None
    assert await store.ledger.get("k:{braced}") is None
    assert await c.r.exists(c.retention_indexed_key) == 1  # the keyspace is scanned once per store


async def test_an_answer_deadline_holds_when_the_servers_clock_is_skewed(
    redis_store: RedisStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline is this process's wall clock, the script compares with Redis ``TIME``: the store measures
    the offset, so a host 100 s ahead of Redis neither refuses a timely decision nor lets a late one through."""
    ahead = time.time
    monkeypatch.setattr(time, "time", lambda: ahead() + 100)
    a, b = make_approval(now=clock.now(), key="a"), make_approval(now=clock.now(), key="b")
    for x in (a, b):
        await redis_store.approvals.create(x)

    def bound(x: Approval, answer_by: float) -> DecideCommand:
        reviewer = Reviewer(id="U1", roles=frozenset({"support"}))
        return DecideCommand(
            approval_id=x.id,
            reviewer=reviewer,
            kind=DecisionKind.APPROVE,
            expected_version=1,
            expected_hash=x.action_hash,
            answer_by=answer_by,
        )

    assert (await redis_store.approvals.decide(bound(a, time.time() + 2), now=clock.now())).status is Status.APPROVED
    with pytest.raises(DecisionRefused) as late:
        await redis_store.approvals.decide(bound(b, time.time() - 2), now=clock.now())
    assert late.value.code is ErrorCode.TOO_LATE


async def test_decided_approvals_leave_every_pending_index_in_their_own_step(
    redis_store: RedisStore, clock: FakeClock
) -> None:
    """10,000 decisions with no page read in between: the pending and due indexes hold only what is pending, so
    the next page (one Lua script) reads no history, and a PING sent while it runs is not held up by it."""
    r, c = redis_store.conn.r, redis_store.conn
    made = [make_approval(now=clock.now(), key=f"k{i}") for i in range(10_000)]
    for start in range(0, len(made), 500):
        await asyncio.gather(*(redis_store.approvals.create(a) for a in made[start : start + 500]))
    decided = made[:9_990]
    for start in range(0, len(decided), 500):
        await asyncio.gather(
            *(
                redis_store.approvals.decide(
                    DecideCommand(
                        approval_id=a.id,
                        reviewer=Reviewer(id="U1", roles=frozenset({"support"})),
                        kind=DecisionKind.APPROVE if i % 2 else DecisionKind.REJECT,
                        expected_version=1,
                        expected_hash=a.action_hash,
                    ),
                    now=clock.now(),
                )
                for i, a in enumerate(decided[start : start + 500])
            )
        )
    await redis_store.approvals.transition(
        made[-1].id, target=Status.CANCELLED, expected_version=None, actor="t", now=clock.now()
    )
    pending_keys = [k async for k in r.scan_iter(match=f"{c.p}:pending:*")]
    assert sum([await r.zcard(k) for k in pending_keys]) == 9  # the nine still pending, nothing else
    assert await r.zcard(f"{c.p}:due") == 9
    page, pong = await asyncio.gather(redis_store.approvals.list_pending(limit=50), r.ping())
    assert pong and sorted(a.id for a in page.items) == sorted(a.id for a in made[9_990:9_999])


async def test_a_callers_id_builds_no_part_of_a_key(redis_store: RedisStore, clock: FakeClock) -> None:
    """Ids with every key separator in them (``:``, ``{``, ``}``, ``%``) stay inside one encoded hash tag: the key
    has the parts hitl gave it and no other, and its hash slot is the id's."""
    odd = ["a:b", "{a}", "a}:{b", "%3A", "run:{x}"]
    for i, name in enumerate(odd):
        await redis_store.runs.save(name, {"status": "paused", "n": i}, expected_version=0, now=clock.now())
        await redis_store.ledger.claim(name, action_hash="h", holder="w", now=clock.now(), lease=60)
        await redis_store.windows.add(name, amount=1.0, now=clock.now(), window=60, event_id="e")
    shape = re.compile(rf"^{redis_store.prefix}:(run|claim|win):\{{([^:{{}}]*)\}}$")
    keys = [k async for k in redis_store.conn.r.scan_iter(match=f"{redis_store.prefix}:*") if shape.match(k)]
    found = sorted((m.group(1), key_id(m.group(2))) for m in map(shape.match, keys) if m)
    assert found == sorted((kind, name) for kind in ("run", "claim", "win") for name in odd)


async def test_a_new_part_of_the_store_is_behind_its_error_boundary(redis_store: RedisStore) -> None:
    """A part of the store written without any decorator of its own still answers a Redis failure with a
    :class:`StoreError` that says what to do, never the client's exception."""

    class Probe(RedisPart):
        async def read(self) -> object:
            key = f"{self.conn.p}:probe"
            await self.r.hset(key, "field", "value")
            return await self.r.get(key)  # WRONGTYPE: a string read of a hash

    with pytest.raises(StoreError) as failed:
        await Probe(redis_store.conn).read()
    assert failed.value.code is ErrorCode.STORE_ERROR
    assert "Redis store failed" in str(failed.value) and "retry" in str(failed.value)
