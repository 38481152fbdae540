"""Retention in SQLite: one transaction removes what ended before the horizons, appends the purge entry and removes
the audit chains past theirs (see :mod:`hitl.engine.domain.retention` for the rules both stores follow)."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.retention import CLAIM_GRACE, LIVE_RUN_STATUSES, TALLY_KEEP, Purged, Retention, purge_entry
from hitl.engine.domain.states import TERMINAL
from hitl.engine.domain.tally import hour_of
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit

__all__ = ["SqlitePurger"]

_FINAL = tuple(sorted(str(s) for s in TERMINAL))
_LIVE = tuple(LIVE_RUN_STATUSES)


def _marks(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join("?" * len(values))


class SqlitePurger:
    """:class:`hitl.engine.ports.Purger` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def due(self, retention: Retention, *, now: float) -> Purged:
        def tx(c: sqlite3.Connection) -> Purged:
            raise _Undo(_purge(c, retention, now, "preview", _ALL))

        try:
            return await self.db.run(tx, blocking=True)
        except _Undo as undone:  # the whole purge, rolled back: exactly what it would remove, nothing removed
            return undone.purged

    async def purge(self, retention: Retention, *, now: float, actor: str = "retention", limit: int = 500) -> Purged:
        # Up to ``limit`` of each kind, off the loop: the write lock is held for one round, never a whole purge.
        return await self.db.run(lambda c: _purge(c, retention, now, actor, limit), blocking=True)


class _Undo(Exception):
    def __init__(self, purged: Purged) -> None:
        super().__init__("preview")
        self.purged = purged


_ALL = 2**62
"""No limit (a preview counts everything due)."""


def _purge(c: sqlite3.Connection, retention: Retention, now: float, actor: str, limit: int) -> Purged:
    """One purge, in the caller's transaction (see the module docstring)."""
    c.execute("DELETE FROM tallies WHERE hour < ?", (hour_of(now - TALLY_KEEP),))  # kept by age alone
    records = retention.records_before(now)
    audit = retention.audit_before(now)
    done = _records(c, records, limit) if records is not None else Purged()
    chains = _chains(c, audit, limit) if audit is not None else []
    events = _events_prefix(c, audit, limit) if audit is not None else []
    purged = done.with_audit(chains, events)
    if purged.total == 0:
        return purged
    if events:
        anchor = events[-1][1]
    else:
        first = c.execute("SELECT prev FROM audit WHERE approval_id IS NULL ORDER BY seq LIMIT 1").fetchone()
        anchor = first[0] if first is not None else ""
    # The purge entry first (it chains onto the newest entry, which stays unless it is old too), then the
    # removal, under the permit the append-only trigger asks for.
    insert_audit(c, purge_entry(purged, anchor=anchor, now=now, actor=actor, retention=retention))
    c.execute("INSERT INTO audit_purge (permit) VALUES (1)")
    if events:
        c.execute("DELETE FROM audit WHERE approval_id IS NULL AND seq <= ?", (events[-1][0],))
        c.execute("UPDATE audit_heads SET length = length - ? WHERE chain = ''", (len(events),))
    ids = [aid for aid, _ in chains]
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        c.execute(f"DELETE FROM audit WHERE approval_id IN ({_marks(part)})", part)
        c.execute(f"DELETE FROM audit_heads WHERE chain IN ({_marks(part)})", part)
    c.execute("DELETE FROM audit_purge")
    return purged


def _records(c: sqlite3.Connection, before: float, limit: int) -> Purged:
    runs = [
        r[0]
        for r in c.execute(
            f"SELECT run_id FROM checkpoints WHERE status NOT IN ({_marks(_LIVE)}) AND status != '' "
            "AND updated_at < ? ORDER BY updated_at LIMIT ?",
            (*_LIVE, before, limit),
        )
    ]
    for run_id in runs:
        c.execute("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))
        c.execute("DELETE FROM run_owners WHERE run_id = ?", (run_id,))
    # Final approvals that ended before the horizon (created before it too: the index narrows the scan), unless
    # the run of their session still runs or waits and may read them.
    approvals = [
        r[0]
        for r in c.execute(
            f"SELECT a.id FROM approvals a WHERE a.status IN ({_marks(_FINAL)}) AND a.created_at < ? "
            "AND json_extract(a.doc, '$.updated_at') < ? AND NOT EXISTS (SELECT 1 FROM checkpoints k "
            f"WHERE k.run_id = json_extract(a.doc, '$.session_id') AND k.status IN ({_marks(_LIVE)})) "
            "ORDER BY a.created_at LIMIT ?",
            (*_FINAL, before, before, *_LIVE, limit),
        )
    ]
    for aid in approvals:
        c.execute("DELETE FROM approvals WHERE id = ?", (aid,))
        c.execute("DELETE FROM messages WHERE approval_id = ?", (aid,))
        c.execute(  # its chain stays, for the audit retention, which finds it here
            "INSERT OR REPLACE INTO kept_chains (approval_id, last_at) "
            "SELECT approval_id, MAX(at) FROM audit WHERE approval_id = ? GROUP BY approval_id",
            (aid,),
        )
    # Claims have no finish time of their own: the lease they last held is when they last ran (a running claim
    # renews it), and they are kept a grace period longer than what they served.
    claims = c.execute(
        "DELETE FROM claims WHERE key IN (SELECT key FROM claims WHERE state IN ('succeeded', 'failed') "
        "AND lease_until < ? LIMIT ?)",
        (before - CLAIM_GRACE, limit),
    ).rowcount
    jobs = c.execute(
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE done = 1 AND created_at < ? LIMIT ?)",
        (before, limit),
    ).rowcount
    trust = c.execute(
        "DELETE FROM trust_grants WHERE (session_id, requester, tool) IN (SELECT session_id, requester, tool FROM "
        "trust_grants WHERE until < ? LIMIT ?)",
        (before, limit),
    ).rowcount
    return Purged(runs=len(runs), approvals=len(approvals), claims=claims, jobs=jobs, trust=trust)


def _chains(c: sqlite3.Connection, before: float, limit: int) -> list[tuple[str, int]]:
    """Approval chains to remove whole, with their lengths: their approval is gone and their last entry is older
    than ``before``. A chain written to after its approval went is kept, and indexed by its new last entry."""
    out: list[tuple[str, int]] = []
    due = c.execute(
        "SELECT approval_id FROM kept_chains WHERE last_at < ? ORDER BY last_at LIMIT ?", (before, limit)
    ).fetchall()
    for (aid,) in due:
        n, last = c.execute("SELECT COUNT(*), MAX(at) FROM audit WHERE approval_id = ?", (aid,)).fetchone()
        if last is not None and last >= before:
            c.execute("UPDATE kept_chains SET last_at = ? WHERE approval_id = ?", (last, aid))
            continue
        c.execute("DELETE FROM kept_chains WHERE approval_id = ?", (aid,))
        if n:
            out.append((str(aid), int(n)))
    return out


def _events_prefix(c: sqlite3.Connection, before: float, limit: int) -> list[tuple[int, str]]:
    """``(seq, link)`` of the run-level chain's oldest entries, up to the first one at or after ``before``."""
    out: list[tuple[int, str]] = []
    rows = c.execute("SELECT seq, at, link FROM audit WHERE approval_id IS NULL ORDER BY seq LIMIT ?", (limit,))
    for seq, at, link in rows:
        if at >= before:
            break
        out.append((int(seq), str(link)))
    return out
