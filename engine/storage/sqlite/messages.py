"""Card message references in SQLite, both ways."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import MessageRef
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import load_approval

__all__ = ["SqliteMessages"]


class SqliteMessages:
    """:class:`hitl.engine.ports.MessageMap` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def set(self, approval_id: str, ref: MessageRef) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO messages (approval_id, channel, ts) VALUES (?, ?, ?)",
                (approval_id, ref.channel, ref.ts),
            )

        await self.db.run(tx)

    async def get(self, approval_id: str) -> MessageRef | None:
        def tx(c: sqlite3.Connection) -> MessageRef | None:
            row = c.execute("SELECT channel, ts FROM messages WHERE approval_id = ?", (approval_id,)).fetchone()
            return MessageRef(channel=row[0], ts=row[1]) if row else None

        return await self.db.run(tx, write=False)

    async def card(self, approval_id: str) -> tuple[MessageRef, Approval] | None:
        def tx(c: sqlite3.Connection) -> tuple[MessageRef, Approval] | None:
            row = c.execute("SELECT channel, ts FROM messages WHERE approval_id = ?", (approval_id,)).fetchone()
            return (MessageRef(channel=row[0], ts=row[1]), load_approval(c, approval_id)) if row else None

        return await self.db.run(tx, write=False)

    async def approval_for(self, ref: MessageRef) -> str | None:
        def tx(c: sqlite3.Connection) -> str | None:
            row = c.execute(
                "SELECT approval_id FROM messages WHERE channel = ? AND ts = ? ORDER BY approval_id LIMIT 1",
                (ref.channel, ref.ts),
            ).fetchone()
            return str(row[0]) if row else None

        return await self.db.run(tx, write=False)

    async def shown_on(self, ref: MessageRef) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "SELECT approval_id FROM messages WHERE channel = ? AND ts = ? ORDER BY approval_id",
                (ref.channel, ref.ts),
            )
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
