"""The audit trail in PostgreSQL: one append-only table (a trigger refuses updates, truncation, and deletes but
retention's), each chain's head moved in the transaction that appends to it."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.audit_heads import ChainWalk, Head, check_anchor, compare_heads, head_digest
from hitl.engine.domain.records import AuditBreak, AuditEntry
from hitl.engine.domain.retention import PURGE_EVENT, anchor_of
from hitl.engine.storage.codec import AUDIT_COLUMNS, audit_entry
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit

__all__ = ["PgAudit"]

_COLS = f"seq, {AUDIT_COLUMNS}, prev, link"
_KEYS = _COLS.split(", ")


def _entry(row: Any) -> AuditEntry:
    return audit_entry(dict(zip(_KEYS, row, strict=True)))


class PgAudit:
    """:class:`hitl.engine.ports.AuditLog` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def append(self, entry: AuditEntry) -> None:
        await self.db.run(lambda c: insert_audit(c, entry))

    async def entries(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        async def tx(c: Conn) -> list[AuditEntry]:
            if approval_id:
                rows = await c.fetch(
                    f"SELECT {_COLS} FROM audit WHERE approval_id = $1 ORDER BY seq LIMIT $2", approval_id, limit
                )
            else:
                rows = await c.fetch(
                    f"SELECT {_COLS} FROM (SELECT {_COLS} FROM audit ORDER BY seq DESC LIMIT $1) AS newest "
                    "ORDER BY seq",
                    limit,
                )
            return [_entry(r) for r in rows]

        return await self.db.run(tx, write=False)

    async def verify(self, *, head: str | None = None) -> tuple[int, AuditBreak | None]:
        # One snapshot (REPEATABLE READ) for the whole walk: appends made meanwhile are not half seen.
        async def tx(c: Conn) -> tuple[int, AuditBreak | None]:
            walk = ChainWalk(await _anchor(c))
            async for row in c.cursor(f"SELECT {_COLS} FROM audit ORDER BY seq", prefetch=1000):
                broken = walk.step(_entry(row))
                if broken is not None:
                    return walk.checked, broken
            checked, links = walk.checked, walk.links
            orphan = await c.fetchval(
                "SELECT a.id FROM approvals a WHERE NOT EXISTS (SELECT 1 FROM audit WHERE approval_id = a.id) "
                "ORDER BY a.created_at LIMIT 1"
            )
            if orphan is not None:
                reason = "the approval's audit entries are missing"
                return checked, AuditBreak(chain=orphan, position=1, reason=reason, checked=checked)
            found = walk.found()
            recorded = {
                str(k): (int(n), str(lk)) for k, n, lk in await c.fetch("SELECT chain, length, link FROM audit_heads")
            }
            broken = compare_heads(found, recorded, checked)
            if broken is None and head is not None:
                broken = check_anchor(head, await _taken(c, head), links, checked)
            return checked, broken

        return await self.db.run(tx, write=False, snapshot=True)

    async def take_head(self) -> str:
        async def tx(c: Conn) -> str:
            rows = await c.fetch("SELECT chain, length, link FROM audit_heads")
            heads = {str(k): (int(n), str(lk)) for k, n, lk in rows}
            digest = head_digest(heads)
            await c.executemany(
                "INSERT INTO audit_anchors (digest, chain, length, link) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT DO NOTHING",
                [(digest, k, n, lk) for k, (n, lk) in sorted(heads.items())],
            )
            return digest

        return await self.db.run(tx)


async def _taken(c: Conn, digest: str) -> dict[str, Head] | None:
    rows = await c.fetch("SELECT chain, length, link FROM audit_anchors WHERE digest = $1", digest)
    return {str(k): (int(n), str(lk)) for k, n, lk in rows} if rows else None


async def _anchor(c: Conn) -> str:
    """The link the run-level chain starts after: the anchor its latest purge entry names ('' before any purge)."""
    row = await c.fetchrow(
        f"SELECT {_COLS} FROM audit WHERE approval_id IS NULL AND event = $1 ORDER BY seq DESC LIMIT 1", PURGE_EVENT
    )
    anchor = anchor_of(_entry(row)) if row is not None else None
    return anchor or ""
