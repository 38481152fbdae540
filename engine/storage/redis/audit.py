"""The audit trail in Redis: each approval's list (written by the same scripts that change it) and a stream
of entries that belong to no approval."""

from __future__ import annotations

from engine.domain.records import AuditEntry
from engine.storage.redis.codec import text
from engine.storage.redis.connection import RedisConnection, store_errors

__all__ = ["RedisAudit"]


@store_errors
class RedisAudit:
    """:class:`engine.ports.AuditLog` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.r = conn.r

    async def append(self, entry: AuditEntry) -> None:
        if entry.approval_id:
            await self.r.rpush(self.conn.audit_key(entry.approval_id), entry.model_dump_json())
        else:
            await self.r.xadd(self.conn.events_key, {"e": entry.model_dump_json()})

    async def entries(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        if approval_id:
            rows = await self.r.lrange(self.conn.audit_key(approval_id), 0, limit - 1)
            return [AuditEntry.model_validate_json(r).model_copy(update={"seq": i + 1}) for i, r in enumerate(rows)]
        # The global view merges the newest approvals' logs with the entries that belong to no approval.
        ids = [text(m) for m in await self.r.zrevrange(self.conn.all_key, 0, limit - 1)]
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                pipe.lrange(self.conn.audit_key(aid), 0, -1)
            pipe.xrevrange(self.conn.events_key, count=limit)
            *logs, stream = await pipe.execute()
        entries = [AuditEntry.model_validate_json(r) for log in logs for r in log]
        entries += [AuditEntry.model_validate_json(fields[b"e" if b"e" in fields else "e"]) for _, fields in stream]
        entries.sort(key=lambda e: e.at)
        return entries[-limit:]
