"""Retention in Redis: ended runs, final approvals, finished claims and lapsed trust grants found from their
indexes and removed one by one (each re-checked in the script that removes it); then the audit removal, atomic
and anchored (see :mod:`hitl.engine.domain.retention`). Jobs need nothing: an acknowledged job is deleted at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from redis.asyncio.client import Pipeline

from hitl.engine.domain.records import AuditEntry, ClaimState
from hitl.engine.domain.retention import CLAIM_GRACE, LIVE_RUN_STATUSES, Purged, Retention, purge_entry
from hitl.engine.domain.states import TERMINAL
from hitl.engine.storage.redis.codec import entry_body, split_link, text
from hitl.engine.storage.redis.connection import key_id
from hitl.engine.storage.redis.filters import stored_entries, voted_key
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisPurger"]

_FINAL_STATES = frozenset(str(s) for s in TERMINAL)
_FINAL = ",".join(sorted(_FINAL_STATES))
"""The final states as ``purge.lua`` takes them."""
_FINISHED = frozenset({str(ClaimState.SUCCEEDED), str(ClaimState.FAILED)})
_SCAN = 500
"""Index entries read per round trip."""
_ALL = 2**62
"""No limit."""


class RedisPurger(RedisPart):
    """:class:`hitl.engine.ports.Purger` on Redis."""

    async def _indexed(self) -> None:
        """Index the runs that ended and the claims that finished before the scripts kept these indexes (a store
        written by an older hitl), once per store: a scan of the keyspace, so it is remembered in a marker key."""
        c = self.conn
        if await self.r.exists(c.retention_indexed_key):
            return
        indexes: tuple[tuple[str, list[str], str, Callable[[str], bool]], ...] = (
            ("run", ["status", "updated_at"], c.ended_key, _run_ended),
            ("claim", ["state", "lease_until"], c.finished_claims_key, _claim_finished),
        )
        for kind, fields, index, done in indexes:
            head = f"{c.p}:{kind}:{{"
            keys = [text(k) async for k in self.r.scan_iter(match=f"{c.p}:{kind}:*", count=1000)]
            for start in range(0, len(keys), _SCAN):
                part = [k for k in keys[start : start + _SCAN] if k.startswith(head) and k.endswith("}")]
                async with self.r.pipeline(transaction=False) as pipe:
                    for key in part:
                        pipe.hmget(key, fields)
                    rows = await pipe.execute()
                found = {
                    key_id(key[len(head) : -1]): float(text(at))
                    for key, (state, at) in zip(part, rows, strict=True)
                    if state is not None and at is not None and done(text(state))
                }
                if found:
                    await self.r.zadd(index, found, nx=True)
        await self.r.set(c.retention_indexed_key, "1")

    async def purge(self, retention: Retention, *, now: float, actor: str = "retention", limit: int = 500) -> Purged:
        await self._indexed()
        records = retention.records_before(now)
        done = Purged()
        if records is not None:
            done = Purged(
                runs=await self._runs(records, limit),
                approvals=await self._approvals(records, limit),
                claims=await self._claims(records - CLAIM_GRACE, limit),
                trust=await self._trust(records),
            )
        for _attempt in range(3):  # another replica's purge going first moves the stream's head: plan again
            planned = await self._audit(retention, now, actor, limit, done)
            if planned is not None:
                return planned
        return done

    async def due(self, retention: Retention, *, now: float) -> Purged:
        """What :meth:`purge` would remove at ``now`` (all of it, not one round), read without removing anything."""
        await self._indexed()
        c = self.conn
        records, audit = retention.records_before(now), retention.audit_before(now)
        runs = claims = trust = 0
        leaving: list[str] = []
        if records is not None:
            ended = await self._due(c.ended_key, records, _ALL)
            async with self.r.pipeline(transaction=False) as pipe:
                for run_id in ended:
                    pipe.hmget(c.run_key(run_id), ["status", "updated_at"])
                rows = await pipe.execute()
            runs = sum(1 for st, at in rows if st and _run_ended(text(st)) and float(at) < records)
            offset = 0
            while (page := await self._approval_page(records, offset)) is not None:
                leaving += [aid for aid, _, _ in page[1]]
                offset += page[0]
            finished = await self._due(c.finished_claims_key, records - CLAIM_GRACE, _ALL)
            async with self.r.pipeline(transaction=False) as pipe:
                for key in finished:
                    pipe.hget(c.claim_key(key), "state")
                claims = sum(1 for st in await pipe.execute() if _claim_finished(text(st)))
            for session in await self.r.smembers(c.trust_sessions_key):
                grants = await self.r.hgetall(c.trust_key(text(session)))
                trust += sum(1 for v in grants.values() if float(json.loads(text(v))[0]) < records)
        chains = entries = 0
        if audit is not None:
            kept = [text(m) for m in await self.r.zrangebyscore(c.chains_key, "-inf", f"({audit!r}")]
            for _, n, last in await self._chain_ends([*kept, *leaving]):
                if last < audit:
                    chains, entries = chains + 1, entries + n
            entries += await self._old_events(audit)
        return Purged(
            runs=runs, approvals=len(leaving), claims=claims, trust=trust, chains=chains, audit_entries=entries
        )

    async def _chain_ends(self, ids: list[str]) -> list[tuple[str, int, float]]:
        """Each approval chain's length and the time of its last entry (0 for an entry without a link)."""
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                pipe.llen(self.conn.audit_key(aid))
                pipe.lindex(self.conn.audit_key(aid), -1)
            rows = await pipe.execute() if ids else []
        out = []
        for aid, n, last in zip(ids, rows[::2], rows[1::2], strict=True):
            parts = split_link(text(last))
            out.append((aid, int(n), AuditEntry.model_validate_json(parts[0]).at if parts is not None else 0.0))
        return out

    async def _old_events(self, before: float) -> int:
        """How many of the run-level chain's oldest entries are older than ``before`` (its removable prefix)."""
        c, n, start = self.conn, 0, "-"
        while True:
            page = cast(list[tuple[Any, dict[str, Any]]], await self.r.xrange(c.events_key, start, "+", count=_SCAN))
            for _, fields in page:
                if _at(fields) >= before:
                    return n
                n += 1
            if len(page) < _SCAN:
                return n
            start = f"({text(page[-1][0])}"

    async def _remove(self, kind: str, cutoff: float, calls: list[tuple[list[str], list[Any]]]) -> int:
        if not calls:
            return 0
        c = self.conn

        def build(pipe: Pipeline) -> None:
            for keys, extra in calls:
                pipe.evalsha(c.purge_script.sha, len(keys), *keys, kind, repr(cutoff), *extra)

        return sum(int(n) for n in await c.pipeline(build, [c.purge_script]))

    async def _due(self, index: str, cutoff: float, limit: int) -> list[str]:
        return [text(m) for m in await self.r.zrangebyscore(index, "-inf", f"({cutoff!r}", start=0, num=limit)]

    async def _runs(self, cutoff: float, limit: int) -> int:
        c = self.conn
        ids = await self._due(c.ended_key, cutoff, limit)
        return await self._remove("run", cutoff, [([c.run_key(i), c.ended_key, c.running_key], [i]) for i in ids])

    async def _claims(self, cutoff: float, limit: int) -> int:
        c = self.conn
        keys = await self._due(c.finished_claims_key, cutoff, limit)
        return await self._remove("claim", cutoff, [([c.claim_key(k), c.finished_claims_key], [k]) for k in keys])

    async def _approvals(self, cutoff: float, limit: int) -> int:
        # Approvals by creation time: one created after the cutoff cannot have ended before it. Ones kept (not
        # final yet, or their run still reads them) are passed over, so the scan goes on past them.
        removed, offset = 0, 0
        while removed < limit:
            found = await self._approval_page(cutoff, offset)
            if found is None:
                break
            scanned, calls = found
            gone = await self._remove(
                "approval", cutoff, [(keys, [aid, _FINAL, *voted]) for aid, keys, voted in calls][: limit - removed]
            )
            removed += gone
            offset += scanned - gone  # what was removed no longer takes a place in the index
        return removed

    async def _approval_page(
        self, cutoff: float, offset: int
    ) -> tuple[int, list[tuple[str, list[str], list[str]]]] | None:
        """One page of the creation-time index from ``offset``: how many entries it held, and the approvals in it
        that retention removes now with the keys the removal script takes and their members of the who-decided
        index (None past the last page)."""
        c = self.conn
        ids = [text(m) for m in await self.r.zrangebyscore(c.all_key, "-inf", f"({cutoff!r}", start=offset, num=_SCAN)]
        if not ids:
            return None
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                pipe.hmget(c.approval_key(aid), ["status", "role", "updated_at", "decisions"])
                pipe.get(c.doc_key(aid))
                pipe.hgetall(c.message_key(aid))
            rows = await pipe.execute()
        due: list[tuple[str, list[str], str, list[str]]] = []
        for i, aid in enumerate(ids):
            (status, role, updated, decisions), doc, card = rows[3 * i], rows[3 * i + 1], rows[3 * i + 2]
            if status is None or doc is None or text(status) not in _FINAL_STATES:
                continue
            if float(text(updated) or 0) >= cutoff:
                continue
            stored = json.loads(text(doc))
            # A decision lives in the approval's hash, not its document: the who-decided members come from there.
            stored["decisions"] = json.loads(text(decisions) or "[]") if decisions is not None else []
            session = str(stored.get("session_id", ""))
            filters, voted = stored_entries(c, stored, aid)
            card = {text(k): text(v) for k, v in card.items()}
            keys = [
                c.approval_key(aid),
                c.doc_key(aid),
                c.all_key,
                f"{c.p}:due",
                c.chains_key,
                c.pending_key(text(role) or None),
                c.message_key(aid),
                c.message_ref_key(card["channel"], card["ts"]) if card else c.message_key(aid),
                c.run_key(session),
                c.message_shown_key(card["channel"], card["ts"]) if card else c.message_key(aid),
                c.ranked_key(text(role) or None),
                *filters,
                voted_key(c),
            ]
            due.append((aid, keys, session, voted))
        async with self.r.pipeline(transaction=False) as pipe:
            for _, _, session, _ in due:
                pipe.hget(c.run_key(session), "status")
            runs = [text(x) for x in await pipe.execute()] if due else []
        calls = [
            (aid, keys, voted)
            for (aid, keys, _, voted), run in zip(due, runs, strict=True)
            if run not in LIVE_RUN_STATUSES
        ]
        return len(ids), calls

    async def _trust(self, cutoff: float) -> int:
        c = self.conn
        sessions = sorted(text(s) for s in await self.r.smembers(c.trust_sessions_key))
        calls = [([c.trust_key(s), c.trust_sessions_key], [s]) for s in sessions]
        return await self._remove("trust", cutoff, calls)

    async def _audit(self, retention: Retention, now: float, actor: str, limit: int, done: Purged) -> Purged | None:
        """Plan and apply the audit removal; None when another purge changed the plan's ground (plan again)."""
        c = self.conn
        cutoff = retention.audit_before(now)
        chains: list[str] = []
        lengths: list[int] = []
        stream: list[tuple[Any, dict[str, Any]]] = []
        if cutoff is not None:
            due = [text(m) for m in await self.r.zrangebyscore(c.chains_key, "-inf", f"({cutoff!r}", 0, limit)]
            later: dict[str, float] = {}
            for aid, n, last in await self._chain_ends(due):
                if last >= cutoff:  # written to after its approval went: kept, and indexed by its last entry
                    later[aid] = last
                else:
                    chains.append(aid)
                    lengths.append(n)
            if later:
                await self.r.zadd(c.chains_key, later)
        head = cast(list[tuple[Any, dict[str, Any]]], await self.r.xrange(c.events_key, count=limit + 1))
        if cutoff is not None:
            for xid, fields in head[:limit]:
                if _at(fields) >= cutoff:
                    break
                stream.append((xid, fields))
        anchor = ""
        if stream:
            anchor = _link(stream[-1][1])
        elif head:
            anchor = _prev(head[0][1])
        purged = done.model_copy(
            update={"chains": len(chains), "audit_entries": sum(lengths) + len(stream)}, deep=False
        )
        if purged.total == 0:
            return purged
        body = entry_body(purge_entry(purged, anchor=anchor, now=now, actor=actor, retention=retention))
        first = text(head[0][0]) if head else ""
        args = [first, body, json.dumps([text(x) for x, _ in stream]), json.dumps(chains)]
        keys = [c.events_key, c.chains_key, *(c.audit_key(a) for a in chains)]
        out = await c.call(c.purge_audit_script, keys, args)
        return purged if text(out[0]) == "ok" else None


def _run_ended(status: str) -> bool:
    return status not in (*LIVE_RUN_STATUSES, "")


def _claim_finished(state: str) -> bool:
    return state in _FINISHED


def _parts(fields: dict[str, Any]) -> tuple[str, str, str]:
    """``(body, prev, link)`` of an events-stream entry."""
    parts = split_link(text(fields.get("e", "")))
    return parts if parts is not None else ("", "", "")


def _at(fields: dict[str, Any]) -> float:
    return AuditEntry.model_validate_json(text(fields.get("e", ""))).at


def _link(fields: dict[str, Any]) -> str:
    return _parts(fields)[2]


def _prev(fields: dict[str, Any]) -> str:
    return _parts(fields)[1]
