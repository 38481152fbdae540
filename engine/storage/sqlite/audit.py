"""The audit trail in SQLite: one append-only table (triggers refuse updates, and deletes but retention's)."""

from __future__ import annotations

import sqlite3

from engine.domain.records import AuditBreak, AuditEntry, chain_link
from engine.domain.retention import PURGE_EVENT, anchor_of
from engine.storage.sqlite.connection import SqliteConnection
from engine.storage.sqlite.rows import audit_body, insert_audit

__all__ = ["SqliteAudit"]

_COLS = "seq, at, actor, event, approval_id, version, action_hash, outcome, detail, prev, link"
_KEYS = _COLS.split(", ")


class SqliteAudit:
    """:class:`engine.ports.AuditLog` on SQLite."""

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
            return [AuditEntry.model_validate(dict(zip(_KEYS, r, strict=True))) for r in rows]

        return await self.db.run(tx, write=False)

    async def verify(self) -> tuple[int, AuditBreak | None]:
        def tx(c: sqlite3.Connection) -> tuple[int, AuditBreak | None]:
            heads: dict[str | None, tuple[str, int]] = {None: (_anchor(c), 0)}
            checked = 0
            for row in c.execute(f"SELECT {_COLS} FROM audit ORDER BY seq"):
                e = AuditEntry.model_validate(dict(zip(_KEYS, row, strict=True)))
                head, position = heads.get(e.approval_id, ("", 0))
                position += 1
                chain = e.approval_id or "events"
                if e.prev != head:
                    return checked, AuditBreak(
                        chain=chain,
                        position=position,
                        reason="an entry before it was removed or moved",
                        checked=checked,
                    )
                if e.link != chain_link(e.prev, audit_body(e)):
                    return checked, AuditBreak(
                        chain=chain, position=position, reason="the entry was changed", checked=checked
                    )
                heads[e.approval_id] = (e.link, position)
                checked += 1
            orphan = c.execute(
                "SELECT id FROM approvals WHERE id NOT IN "
                "(SELECT approval_id FROM audit WHERE approval_id IS NOT NULL) ORDER BY created_at LIMIT 1"
            ).fetchone()
            if orphan is not None:
                reason = "the approval's audit entries are missing"
                return checked, AuditBreak(chain=orphan[0], position=1, reason=reason, checked=checked)
            return checked, None

        return await self.db.run(tx, write=False, blocking=True)  # the whole trail: off the loop


def _anchor(c: sqlite3.Connection) -> str:
    """The link the run-level chain starts after: the anchor its latest purge entry names ('' before any purge)."""
    row = c.execute(
        f"SELECT {_COLS} FROM audit WHERE approval_id IS NULL AND event = ? ORDER BY seq DESC LIMIT 1", (PURGE_EVENT,)
    ).fetchone()
    anchor = anchor_of(AuditEntry.model_validate(dict(zip(_KEYS, row, strict=True)))) if row is not None else None
    return anchor or ""
