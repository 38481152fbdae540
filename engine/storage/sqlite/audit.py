"""The audit trail in SQLite: one append-only table (triggers refuse updates, and deletes but retention's)."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.audit_heads import ChainWalk, Head, check_anchor, compare_heads, head_digest
from hitl.engine.domain.records import AuditBreak, AuditEntry
from hitl.engine.domain.retention import PURGE_EVENT, anchor_of
from hitl.engine.storage.codec import AUDIT_COLUMNS, audit_entry
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit

__all__ = ["SqliteAudit"]

_COLS = f"seq, {AUDIT_COLUMNS}, prev, link"
_KEYS = _COLS.split(", ")


class SqliteAudit:
    """:class:`hitl.engine.ports.AuditLog` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def append(self, entry: AuditEntry) -> None:
        await self.db.run(lambda c: insert_audit(c, entry))

    async def entries(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        def tx(c: sqlite3.Connection) -> list[AuditEntry]:
            if approval_id:
                rows = c.execute(
                    f"SELECT {_COLS} FROM audit WHERE approval_id = ? ORDER BY seq LIMIT ?", (approval_id, limit)
                ).fetchall()
            else:
                rows = c.execute(
                    f"SELECT {_COLS} FROM (SELECT {_COLS} FROM audit ORDER BY seq DESC LIMIT ?) ORDER BY seq", (limit,)
                ).fetchall()
            return [audit_entry(dict(zip(_KEYS, r, strict=True))) for r in rows]

        return await self.db.run(tx, write=False)

    async def verify(self, *, head: str | None = None) -> tuple[int, AuditBreak | None]:
        def tx(c: sqlite3.Connection) -> tuple[int, AuditBreak | None]:
            walk = ChainWalk(_anchor(c))
            for row in c.execute(f"SELECT {_COLS} FROM audit ORDER BY seq"):
                broken = walk.step(audit_entry(dict(zip(_KEYS, row, strict=True))))
                if broken is not None:
                    return walk.checked, broken
            checked, links = walk.checked, walk.links
            orphan = c.execute(
                "SELECT id FROM approvals WHERE id NOT IN "
                "(SELECT approval_id FROM audit WHERE approval_id IS NOT NULL) ORDER BY created_at LIMIT 1"
            ).fetchone()
            if orphan is not None:
                reason = "the approval's audit entries are missing"
                return checked, AuditBreak(chain=orphan[0], position=1, reason=reason, checked=checked)
            found = walk.found()
            recorded = {
                str(k): (int(n), str(lk)) for k, n, lk in c.execute("SELECT chain, length, link FROM audit_heads")
            }
            broken = compare_heads(found, recorded, checked)
            if broken is None and head is not None:
                broken = check_anchor(head, _taken(c, head), links, checked)
            return checked, broken

        return await self.db.run(tx, write=False, blocking=True)  # the whole trail: off the loop

    async def take_head(self) -> str:
        def tx(c: sqlite3.Connection) -> str:
            heads = {str(k): (int(n), str(lk)) for k, n, lk in c.execute("SELECT chain, length, link FROM audit_heads")}
            digest = head_digest(heads)
            c.executemany(
                "INSERT OR IGNORE INTO audit_anchors (digest, chain, length, link) VALUES (?, ?, ?, ?)",
                [(digest, k, n, lk) for k, (n, lk) in heads.items()],
            )
            return digest

        return await self.db.run(tx, blocking=True)


def _taken(c: sqlite3.Connection, digest: str) -> dict[str, Head] | None:
    rows = c.execute("SELECT chain, length, link FROM audit_anchors WHERE digest = ?", (digest,)).fetchall()
    return {str(k): (int(n), str(lk)) for k, n, lk in rows} if rows else None


def _anchor(c: sqlite3.Connection) -> str:
    """The link the run-level chain starts after: the anchor its latest purge entry names ('' before any purge)."""
    row = c.execute(
        f"SELECT {_COLS} FROM audit WHERE approval_id IS NULL AND event = ? ORDER BY seq DESC LIMIT 1", (PURGE_EVENT,)
    ).fetchone()
    anchor = anchor_of(audit_entry(dict(zip(_KEYS, row, strict=True)))) if row is not None else None
    return anchor or ""
