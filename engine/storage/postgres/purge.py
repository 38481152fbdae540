"""Retention in PostgreSQL: one transaction removes what ended before the horizons, appends the purge entry and
removes the audit chains past theirs (see :mod:`hitl.engine.domain.retention` for the rules every store follows)."""

from __future__ import annotations

from hitl.engine.domain.retention import CLAIM_GRACE, LIVE_RUN_STATUSES, TALLY_KEEP, Purged, Retention, purge_entry
from hitl.engine.domain.states import TERMINAL
from hitl.engine.domain.tally import hour_of
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit, rows_touched

__all__ = ["PgPurger"]

_FINAL = sorted(str(s) for s in TERMINAL)
_LIVE = list(LIVE_RUN_STATUSES)
_ALL = 2**62
"""No limit (a preview counts everything due)."""


class PgPurger:
    """:class:`hitl.engine.ports.Purger` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def due(self, retention: Retention, *, now: float) -> Purged:
        async def tx(c: Conn) -> Purged:
            raise _Undo(await _purge(c, retention, now, "preview", _ALL))

        try:
            return await self.db.run(tx)
        except _Undo as undone:  # the whole purge, rolled back: exactly what it would remove, nothing removed
            return undone.purged

    async def purge(self, retention: Retention, *, now: float, actor: str = "retention", limit: int = 500) -> Purged:
        return await self.db.run(lambda c: _purge(c, retention, now, actor, limit))


class _Undo(Exception):
    def __init__(self, purged: Purged) -> None:
        super().__init__("preview")
        self.purged = purged


async def _purge(c: Conn, retention: Retention, now: float, actor: str, limit: int) -> Purged:
    """One purge, in the caller's transaction (see the module docstring)."""
    await c.execute("DELETE FROM tallies WHERE hour < $1", hour_of(now - TALLY_KEEP))  # kept by age alone
    records = retention.records_before(now)
    audit = retention.audit_before(now)
    done = await _records(c, records, limit) if records is not None else Purged()
    chains = await _chains(c, audit, limit) if audit is not None else []
    events = await _events_prefix(c, audit, limit) if audit is not None else []
    purged = done.with_audit(chains, events)
    if purged.total == 0:
        return purged
    if events:
        anchor = events[-1][1]
    else:
        first = await c.fetchval("SELECT prev FROM audit WHERE approval_id IS NULL ORDER BY seq LIMIT 1")
        anchor = first if first is not None else ""
    # The purge entry first (it chains onto the newest entry, which stays unless it is old too), then the
    # removal, under the permit the append-only trigger asks for.
    await insert_audit(c, purge_entry(purged, anchor=anchor, now=now, actor=actor, retention=retention))
    await c.execute("INSERT INTO audit_purge (permit) VALUES (1)")
    if events:
        await c.execute("DELETE FROM audit WHERE approval_id IS NULL AND seq <= $1", events[-1][0])
        await c.execute("UPDATE audit_heads SET length = length - $1 WHERE chain = ''", len(events))
    ids = [aid for aid, _ in chains]
    if ids:
        await c.execute("DELETE FROM audit WHERE approval_id = ANY($1::text[])", ids)
        await c.execute("DELETE FROM audit_heads WHERE chain = ANY($1::text[])", ids)
    await c.execute("DELETE FROM audit_purge")
    return purged


async def _records(c: Conn, before: float, limit: int) -> Purged:
    runs = [
        str(r[0])
        for r in await c.fetch(
            "SELECT run_id FROM checkpoints WHERE status != ALL($1::text[]) AND status != '' AND updated_at < $2 "
            "ORDER BY updated_at LIMIT $3",
            _LIVE,
            before,
            limit,
        )
    ]
    if runs:
        await c.execute("DELETE FROM checkpoints WHERE run_id = ANY($1::text[])", runs)
        await c.execute("DELETE FROM run_owners WHERE run_id = ANY($1::text[])", runs)
    # Final approvals that ended before the horizon (created before it too: the index narrows the scan), unless
    # the run of their session still runs or waits and may read them.
    approvals = [
        str(r[0])
        for r in await c.fetch(
            "SELECT a.id FROM approvals a WHERE a.status = ANY($1::text[]) AND a.created_at < $2 "
            "AND (a.doc::jsonb ->> 'updated_at')::float8 < $2 AND NOT EXISTS (SELECT 1 FROM checkpoints k "
            "WHERE k.run_id = a.doc::jsonb ->> 'session_id' AND k.status = ANY($3::text[])) "
            "ORDER BY a.created_at LIMIT $4",
            _FINAL,
            before,
            _LIVE,
            limit,
        )
    ]
    if approvals:
        await c.execute("DELETE FROM approvals WHERE id = ANY($1::text[])", approvals)
        await c.execute("DELETE FROM messages WHERE approval_id = ANY($1::text[])", approvals)
        await c.execute(  # their chains stay, for the audit retention, which finds them here
            "INSERT INTO kept_chains (approval_id, last_at) SELECT approval_id, MAX(at) FROM audit "
            "WHERE approval_id = ANY($1::text[]) GROUP BY approval_id "
            "ON CONFLICT (approval_id) DO UPDATE SET last_at = excluded.last_at",
            approvals,
        )
    # Claims have no finish time of their own: the lease they last held is when they last ran (a running claim
    # renews it), and they are kept a grace period longer than what they served.
    claims = await _deleted(
        c,
        "DELETE FROM claims WHERE key IN (SELECT key FROM claims WHERE state IN ('succeeded', 'failed') "
        "AND lease_until < $1 LIMIT $2)",
        before - CLAIM_GRACE,
        limit,
    )
    jobs = await _deleted(
        c, "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE done AND created_at < $1 LIMIT $2)", before, limit
    )
    trust = await _deleted(
        c,
        "DELETE FROM trust_grants WHERE (session_id, requester, tool) IN (SELECT session_id, requester, tool FROM "
        "trust_grants WHERE until < $1 LIMIT $2)",
        before,
        limit,
    )
    return Purged(runs=len(runs), approvals=len(approvals), claims=claims, jobs=jobs, trust=trust)


async def _deleted(c: Conn, sql: str, *args: object) -> int:
    return rows_touched(await c.execute(sql, *args))


async def _chains(c: Conn, before: float, limit: int) -> list[tuple[str, int]]:
    """Approval chains to remove whole, with their lengths: their approval is gone and their last entry is older
    than ``before``. A chain written to after its approval went is kept, and indexed by its new last entry."""
    out: list[tuple[str, int]] = []
    due = await c.fetch(
        "SELECT approval_id FROM kept_chains WHERE last_at < $1 ORDER BY last_at LIMIT $2", before, limit
    )
    for (aid,) in due:
        found = await c.fetchrow("SELECT COUNT(*), MAX(at) FROM audit WHERE approval_id = $1", aid)
        assert found is not None  # an aggregate always has its one row
        n, last = found
        if last is not None and last >= before:
            await c.execute("UPDATE kept_chains SET last_at = $1 WHERE approval_id = $2", last, aid)
            continue
        await c.execute("DELETE FROM kept_chains WHERE approval_id = $1", aid)
        if n:
            out.append((str(aid), int(n)))
    return out


async def _events_prefix(c: Conn, before: float, limit: int) -> list[tuple[int, str]]:
    """``(seq, link)`` of the run-level chain's oldest entries, up to the first one at or after ``before``."""
    out: list[tuple[int, str]] = []
    rows = await c.fetch("SELECT seq, at, link FROM audit WHERE approval_id IS NULL ORDER BY seq LIMIT $1", limit)
    for seq, at, link in rows:
        if at >= before:
            break
        out.append((int(seq), str(link)))
    return out
