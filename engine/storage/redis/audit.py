"""The audit trail in Redis: each approval's list (written by the same scripts that change it) and a stream
of entries that belong to no approval. Approvals are found from two indexes: the stored ones, and those retention
removed while their chain is kept (see :mod:`engine.domain.retention`)."""

from __future__ import annotations

from typing import Any, cast

from engine.domain.records import AuditBreak, AuditEntry, chain_link
from engine.domain.retention import anchor_of
from engine.storage.redis.codec import entry_body, split_link, text
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
            await self.conn.call(self.conn.audit_script, [self.conn.audit_key(entry.approval_id)], [entry_body(entry)])
        else:
            await self.conn.call(self.conn.events_script, [self.conn.events_key], [entry_body(entry)])

    async def entries(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        if approval_id:
            rows = await self.r.lrange(self.conn.audit_key(approval_id), 0, limit - 1)
            return [AuditEntry.model_validate_json(r).model_copy(update={"seq": i + 1}) for i, r in enumerate(rows)]
        # The global view merges the newest approvals' logs with the entries that belong to no approval.
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.zrevrange(self.conn.all_key, 0, limit - 1)
            pipe.zrevrange(self.conn.chains_key, 0, limit - 1)
            stored, kept = await pipe.execute()
        ids = [text(m) for m in [*stored, *kept]]
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                pipe.lrange(self.conn.audit_key(aid), 0, -1)
            pipe.xrevrange(self.conn.events_key, count=limit)
            *logs, stream = await pipe.execute()
        entries = [AuditEntry.model_validate_json(r) for log in logs for r in log]
        # The stream read came newest first: put it back in order, so entries with equal times keep theirs.
        entries += [
            AuditEntry.model_validate_json(fields[b"e" if b"e" in fields else "e"]) for _, fields in stream[::-1]
        ]
        entries.sort(key=lambda e: e.at)
        return entries[-limit:]

    async def verify(self) -> tuple[int, AuditBreak | None]:
        checked = 0
        ids = [text(m) for m in await self.r.zrange(self.conn.all_key, 0, -1)]
        ids += [text(m) for m in await self.r.zrange(self.conn.chains_key, 0, -1)]
        chains: list[tuple[str, list[str]]] = []
        for start in range(0, len(ids), 200):
            async with self.r.pipeline(transaction=False) as pipe:
                for aid in ids[start : start + 200]:
                    pipe.lrange(self.conn.audit_key(aid), 0, -1)
                logs = await pipe.execute()
            chains += [(aid, [text(x) for x in log]) for aid, log in zip(ids[start : start + 200], logs, strict=True)]
        stream = cast(list[tuple[Any, dict[str, Any]]], await self.r.xrange(self.conn.events_key))
        events = [text(fields.get("e", "")) for _, fields in stream]
        for chain, stored in [*chains, ("events", events)]:
            if not stored and chain != "events":
                reason = "the approval's audit entries are missing"
                return checked, AuditBreak(chain=chain, position=1, reason=reason, checked=checked)
            prev = _anchor(events) if chain == "events" else ""
            for position, element in enumerate(stored, start=1):
                parts = split_link(element)
                if parts is None:
                    reason = "the entry carries no link (written or replaced outside hitl)"
                    return checked, AuditBreak(chain=chain, position=position, reason=reason, checked=checked)
                body, claimed_prev, link = parts
                if claimed_prev != prev:
                    reason = "an entry before it was removed or moved"
                    return checked, AuditBreak(chain=chain, position=position, reason=reason, checked=checked)
                if link != chain_link(prev, body):
                    return checked, AuditBreak(
                        chain=chain, position=position, reason="the entry was changed", checked=checked
                    )
                prev = link
                checked += 1
        return checked, None


def _anchor(events: list[str]) -> str:
    """The link the events chain starts after: the anchor its latest purge entry names ('' before any purge)."""
    for element in reversed(events):
        parts = split_link(element)
        if parts is None:
            continue
        anchor = anchor_of(AuditEntry.model_validate_json(parts[0]))
        if anchor is not None:
            return anchor
    return ""
