"""Redis-only behaviour: script reloading, hash tags, one round trip per decide."""

from __future__ import annotations

import re

from engine.domain.decide import DecideCommand
from engine.domain.models import DecisionKind, Reviewer, Status
from engine.storage.redis import RedisStore
from engine.testing import FakeClock, make_approval


async def test_scripts_reload_after_a_server_flush(redis_store: RedisStore, clock: FakeClock) -> None:
    a = make_approval(now=clock.now())
    await redis_store.conn.r.script_flush()
    await redis_store.approvals.create(a)
    await redis_store.conn.r.script_flush()
    cmd = DecideCommand(
        approval_id=a.id,
        reviewer=Reviewer(id="U1", roles=frozenset({"support"})),
        kind=DecisionKind.APPROVE,
        expected_version=1,
        expected_hash=a.action_hash,
    )
    assert (await redis_store.approvals.decide(cmd, now=clock.now())).status is Status.APPROVED
    await redis_store.conn.r.script_flush()
    assert await redis_store.approvals.expire_due(now=clock.now() + 10**6) == []


async def test_one_approvals_keys_share_a_hash_tag(redis_store: RedisStore, clock: FakeClock) -> None:
    a = make_approval(now=clock.now())
    await redis_store.approvals.create(a)
    keys = [k async for k in redis_store.conn.r.scan_iter(match=f"{redis_store.prefix}:{{{a.id}}}*")]
    assert len(keys) == 3  # hash, static document, audit list
    assert {re.search(r"\{([^}]*)\}", k).group(1) for k in keys} == {a.id}  # type: ignore[union-attr]
