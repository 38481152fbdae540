"""Session trust, rolling windows, the audit trail and card message references in SQLite."""

from __future__ import annotations

import sqlite3

from engine.domain.policy import WindowStats
from engine.domain.records import AuditEntry, MessageRef, TrustGrant
from engine.storage.sqlite_base import SqliteBase, _audit, _window

__all__ = ["SqliteRecords"]


class SqliteRecords(SqliteBase):
    # -- trust ----------------------------------------------------------------------------------------
    async def grant_trust(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO trust (session_id, tool, granted_by, until) VALUES (?, ?, ?, ?)",
                (session_id, tool, by, until),
            )
            _audit(c, AuditEntry(at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}"))

        await self._run(tx)

    async def list_trust(self, session_id: str, *, now: float) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                "SELECT tool, granted_by, until FROM trust WHERE session_id = ? AND until > ? ORDER BY tool",
                (session_id, now),
            ).fetchall()
            return [TrustGrant(session_id=session_id, tool=t, granted_by=b, until=u) for t, b, u in rows]

        return await self._run(tx, write=False)

    async def list_all_trust(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                "SELECT session_id, tool, granted_by, until FROM trust WHERE until > ? ORDER BY session_id, tool "
                "LIMIT ?",
                (now, limit),
            ).fetchall()
            return [TrustGrant(session_id=s, tool=t, granted_by=b, until=u) for s, t, b, u in rows]

        return await self._run(tx, write=False)

    async def revoke_trust(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        def tx(c: sqlite3.Connection) -> bool:
            n = c.execute(
                "DELETE FROM trust WHERE session_id = ? AND tool = ? AND until > ?", (session_id, tool, now)
            ).rowcount
            if n:
                _audit(c, AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}"))
            return bool(n)

        return await self._run(tx)

    # -- rolling windows ------------------------------------------------------------------------------
    async def window_add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        def tx(c: sqlite3.Connection) -> WindowStats:
            stats = _window(c, key, now, window, exclude=event_id)
            c.execute("DELETE FROM windows WHERE key = ? AND at <= ?", (key, now - window))
            c.execute(
                "INSERT OR IGNORE INTO windows (key, event_id, at, amount) VALUES (?, ?, ?, ?)",
                (key, event_id, now, amount),
            )
            return stats

        return await self._run(tx)

    async def window_stats(self, key: str, *, now: float, window: float) -> WindowStats:
        return await self._run(lambda c: _window(c, key, now, window), write=False)

    # -- audit and messages ---------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        await self._run(lambda c: _audit(c, entry))

    async def audit(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        def tx(c: sqlite3.Connection) -> list[AuditEntry]:
            cols = "seq, at, actor, event, approval_id, version, action_hash, outcome, detail"
            if approval_id:
                rows = c.execute(
                    f"SELECT {cols} FROM audit WHERE approval_id = ? ORDER BY seq LIMIT ?",
                    (approval_id, limit),
                ).fetchall()
            else:
                rows = c.execute(
                    f"SELECT {cols} FROM (SELECT {cols} FROM audit ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                    (limit,),
                ).fetchall()
            keys = cols.split(", ")
            return [AuditEntry.model_validate(dict(zip(keys, r, strict=True))) for r in rows]

        return await self._run(tx, write=False)

    async def set_message(self, approval_id: str, ref: MessageRef) -> None:
        await self._run(
            lambda c: (
                c.execute(
                    "INSERT OR REPLACE INTO messages (approval_id, channel, ts) VALUES (?, ?, ?)",
                    (approval_id, ref.channel, ref.ts),
                )
                and None
            )
        )

    async def get_message(self, approval_id: str) -> MessageRef | None:
        def tx(c: sqlite3.Connection) -> MessageRef | None:
            row = c.execute("SELECT channel, ts FROM messages WHERE approval_id = ?", (approval_id,)).fetchone()
            return MessageRef(channel=row[0], ts=row[1]) if row else None

        return await self._run(tx, write=False)

    async def approval_for_message(self, ref: MessageRef) -> str | None:
        def tx(c: sqlite3.Connection) -> str | None:
            row = c.execute(
                "SELECT approval_id FROM messages WHERE channel = ? AND ts = ?", (ref.channel, ref.ts)
            ).fetchone()
            return str(row[0]) if row else None

        return await self._run(tx, write=False)
