"""Card message references in PostgreSQL, both ways."""

from __future__ import annotations

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import MessageRef
from hitl.engine.errors import NotFound
from hitl.engine.storage.postgres.connection import Conn, PgConnection

__all__ = ["PgMessages"]


class PgMessages:
    """:class:`hitl.engine.ports.MessageMap` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def set(self, approval_id: str, ref: MessageRef) -> None:
        async def tx(c: Conn) -> None:
            await c.execute(
                "INSERT INTO messages (approval_id, channel, ts) VALUES ($1, $2, $3) "
                "ON CONFLICT (approval_id) DO UPDATE SET channel = excluded.channel, ts = excluded.ts",
                approval_id,
                ref.channel,
                ref.ts,
            )

        await self.db.run(tx)

    async def get(self, approval_id: str) -> MessageRef | None:
        async def tx(c: Conn) -> MessageRef | None:
            row = await c.fetchrow("SELECT channel, ts FROM messages WHERE approval_id = $1", approval_id)
            return MessageRef(channel=row[0], ts=row[1]) if row else None

        return await self.db.run(tx, write=False)

    async def card(self, approval_id: str) -> tuple[MessageRef, Approval] | None:
        async def tx(c: Conn) -> tuple[MessageRef, Approval] | None:
            row = await c.fetchrow(
                "SELECT m.channel, m.ts, a.doc FROM messages m LEFT JOIN approvals a ON a.id = m.approval_id "
                "WHERE m.approval_id = $1",
                approval_id,
            )
            if row is None:
                return None
            if row[2] is None:
                raise NotFound.approval(approval_id)
            return MessageRef(channel=row[0], ts=row[1]), Approval.model_validate_json(row[2])

        return await self.db.run(tx, write=False)

    async def approval_for(self, ref: MessageRef) -> str | None:
        async def tx(c: Conn) -> str | None:
            found = await c.fetchval(
                "SELECT approval_id FROM messages WHERE channel = $1 AND ts = $2 ORDER BY approval_id LIMIT 1",
                ref.channel,
                ref.ts,
            )
            return str(found) if found is not None else None

        return await self.db.run(tx, write=False)

    async def shown_on(self, ref: MessageRef) -> list[str]:
        async def tx(c: Conn) -> list[str]:
            rows = await c.fetch(
                "SELECT approval_id FROM messages WHERE channel = $1 AND ts = $2 ORDER BY approval_id",
                ref.channel,
                ref.ts,
            )
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
