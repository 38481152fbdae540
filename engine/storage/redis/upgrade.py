"""Bringing a Redis store an older hitl wrote to this release: its records and its key layout.

Redis keys carry no schema version, so the store marks its layout (:data:`~.connection.LAYOUT`) and the first
operation of a process upgrades an unmarked store that holds records (:meth:`~.connection.RedisConnection.ready`);
``hitl migrate`` runs it on purpose. Every step is idempotent, so an upgrade that died midway is run again whole.
"""

from __future__ import annotations

import json
import logging
import time

from hitl.engine.domain.models import kind_of_older
from hitl.engine.domain.ranking import due_soon_at, rank_key
from hitl.engine.domain.records import entry_body
from hitl.engine.domain.upgrade_grants import grant_ended_at_upgrade
from hitl.engine.storage.redis.approvals import queue_read, read_result
from hitl.engine.storage.redis.codec import KIND_FIRST, text, with_kind_first
from hitl.engine.storage.redis.connection import ANY_ROLE, KEYS_ENCODED, RedisConnection, key_part
from hitl.engine.storage.redis.filters import index_filters

log = logging.getLogger(__name__)

__all__ = ["upgrade"]

_ENCODED_KINDS = ("run", "claim", "win")
"""Keys whose hash tag holds a caller's id: runs, execution claims, rolling windows."""


async def upgrade(conn: RedisConnection) -> None:
    """Every step, in order: older trust grants removed (each audited as ended), approval kinds written, alert
    states moved out of the runs, (on a store whose keys are not encoded yet) caller ids inside keys encoded, then
    every pending approval put in the ranked index of its role and in the due-soon index, and every approval in the
    inbox's filter indexes."""
    await _drop_legacy_grants(conn)
    await _write_kinds(conn)
    await _move_alert_states(conn)
    if await conn.r.get(conn.layout_key) not in KEYS_ENCODED:
        await _encode_keys(conn)
    await _rank_pending(conn)
    await _index_filters(conn)


async def _rank_pending(c: RedisConnection) -> None:
    """Each approval in a pending index added to its role's ranked index, at the rank its document gives (one an
    older hitl wrote kept no ratio: it ranks by tier and deadline), and to the due-soon index, at when it becomes
    due soon. ``NX``: a score already there is kept."""
    for role in sorted(text(r) for r in await c.r.smembers(f"{c.p}:pending-roles")):
        name = None if role == ANY_ROLE else role
        ids = [text(m) for m in await c.r.zrange(c.pending_key(name), 0, -1)]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            async with c.r.pipeline(transaction=False) as pipe:
                for approval_id in chunk:
                    queue_read(pipe, c, approval_id)
                rows = await pipe.execute()
            ranks: dict[str, int] = {}
            soon: dict[str, float] = {}
            for i, approval_id in enumerate(chunk):
                found = read_result(rows[2 * i], rows[2 * i + 1])
                if found is not None and found.is_open:
                    ranks[approval_id] = rank_key(found)
                    soon[approval_id] = due_soon_at(found)
            if ranks:
                await c.r.zadd(c.ranked_key(name), ranks, nx=True)
                await c.r.zadd(c.soon_key, soon, nx=True)


async def _index_filters(c: RedisConnection) -> None:
    """Each approval in the inbox's filter indexes (:func:`~.filters.index_filters`): its tool, tier and requester,
    decided when it is, and who recorded a decision or vote on it. ``NX``: an entry already there is kept."""
    cursor = 0
    while True:
        cursor, found = await c.r.zscan(c.all_key, cursor, count=500)
        ids = [text(m) for m, _ in found]
        async with c.r.pipeline(transaction=False) as pipe:
            for approval_id in ids:
                queue_read(pipe, c, approval_id)
            rows = await pipe.execute()
        async with c.r.pipeline(transaction=False) as pipe:
            for i in range(len(ids)):
                approval = read_result(rows[2 * i], rows[2 * i + 1])
                if approval is not None:
                    index_filters(pipe, c, approval)
            await pipe.execute()
        if cursor == 0:
            return


async def _drop_legacy_grants(c: RedisConnection) -> None:
    """Trust grants an older hitl wrote named no requester, so they are removed rather than guessed (each would
    have lapsed within ``trust_ttl``); nothing reads them. Each is audited as ended with its removal, a session's
    grants in one script (:func:`~hitl.engine.domain.upgrade_grants.grant_ended_at_upgrade`)."""
    now = time.time()  # the upgrade happens now, as a grant's own audit entry is stamped when it is written
    for session_id in sorted(text(s) for s in await c.r.smembers(c.legacy_trust_sessions_key)):
        key = c.legacy_trust_key(session_id)
        entries = []
        for tool, value in sorted((text(t), v) for t, v in (await c.r.hgetall(key)).items()):
            until, by = json.loads(value)
            ended = grant_ended_at_upgrade(session_id=session_id, tool=tool, granted_by=str(by), until=until, now=now)
            entries.append(entry_body(ended))
        await c.call(c.grants_ended_script, [c.events_key, key, c.legacy_trust_sessions_key], [session_id, *entries])


async def _move_alert_states(c: RedisConnection) -> None:
    """Alert state an older hitl kept as a run record (``run:{alert:<name>}``, the id as it was) moved to its own
    hash, where no run a caller names can overwrite it. A caller's own run under such a name stays a run."""
    head = f"{c.p}:run:{{"
    async for key in c.r.scan_iter(match=f"{head}alert:*", count=500):
        found = await c.r.hmget(key, ["data", "version"])
        if found[0] is None:
            continue
        data = json.loads(found[0])
        if not isinstance(data, dict) or data.get("kind") != "alert":
            continue
        run_id = text(key)[len(head) : -1]
        record = json.dumps({"version": int(found[1] or 1), "data": data}, separators=(",", ":"))
        await c.r.hsetnx(c.alerts_key, run_id.removeprefix("alert:"), record)
        await c.r.delete(key)
        for index in (c.running_key, c.paused_key, c.ended_key):
            await c.r.zrem(index, run_id)


async def _write_kinds(c: RedisConnection) -> None:
    """Give every approval document an older hitl wrote the kind its old markers meant (reading one without it
    works too: :func:`~hitl.engine.domain.models.kind_of_older`; this makes it a field). Documents never change
    after creation, so each is rewritten on its own; Python's JSON keeps every number as it was."""
    cursor = 0
    while True:
        cursor, found = await c.r.zscan(c.all_key, cursor, count=500)
        ids = [text(m) for m, _ in found]
        docs = await c.r.mget([c.doc_key(i) for i in ids]) if ids else []
        for approval_id, doc in zip(ids, docs, strict=True):
            if doc is not None and not text(doc).startswith(KIND_FIRST):
                data = json.loads(doc)
                await c.r.set(c.doc_key(approval_id), with_kind_first(data, str(kind_of_older(data))))
        if cursor == 0:
            return


async def _encode_keys(c: RedisConnection) -> None:
    """Rename each run, claim and window key an older hitl built from a caller's id as given to the id encoded
    (:func:`~.connection.key_part`). Each rename is recorded with it in one transaction, so an upgrade run again
    after a crash never encodes a key twice; a key whose new name is taken is left and logged."""
    done = f"{c.p}:layout-renamed"
    renamed = {text(k) for k in await c.r.smembers(done)}
    for kind in _ENCODED_KINDS:
        head = f"{c.p}:{kind}:{{"
        # Listed first: a scan may return a key renamed meanwhile, which must not be encoded again.
        keys = [text(k) async for k in c.r.scan_iter(match=f"{head}*", count=1000)]
        for key in keys:
            if key in renamed or not key.endswith("}"):
                continue
            new = f"{head}{key_part(key[len(head) : -1])}}}"
            if new == key:
                continue
            async with c.r.pipeline(transaction=True) as pipe:
                pipe.renamenx(key, new)
                pipe.sadd(done, new)
                moved, _ = await pipe.execute()
            if not moved:
                log.warning("left Redis key %s as it was: %s exists already", key, new)
    await c.r.delete(done)
