"""Session trust grants in Redis: a hash per session, plus the set of sessions that have grants."""

from __future__ import annotations

import json

from hitl.engine.domain.records import AuditEntry, TrustGrant
from hitl.engine.storage.redis.codec import entry_body, text
from hitl.engine.storage.redis.connection import RedisConnection, store_errors

__all__ = ["RedisTrust"]


@store_errors
class RedisTrust:
    """:class:`hitl.engine.ports.TrustStore` on Redis; grants and revocations are audited."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.r = conn.r
        self._sessions = conn.trust_sessions_key
        self._key = conn.trust_key

    async def grant(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        entry = AuditEntry(at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}")
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self._key(session_id), tool, json.dumps([until, by]))
            pipe.sadd(self._sessions, session_id)
            await pipe.execute()
        await self.conn.call(self.conn.events_script, [self.conn.events_key], [entry_body(entry)])

    async def active(self, session_id: str, *, now: float) -> list[TrustGrant]:
        raw = await self.r.hgetall(self._key(session_id))
        out = []
        for tool, val in raw.items():
            until, by = json.loads(val)
            if until > now:
                out.append(TrustGrant(session_id=session_id, tool=text(tool), granted_by=by, until=until))
        return sorted(out, key=lambda g: g.tool)

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        out: list[TrustGrant] = []
        for session_id in sorted(text(x) for x in await self.r.smembers(self._sessions)):
            out += await self.active(session_id, now=now)  # lapsed grants stay until retention removes them
            if len(out) >= limit:
                break
        return out[:limit]

    async def revoke(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        grants = {g.tool for g in await self.active(session_id, now=now)}
        removed = bool(await self.r.hdel(self._key(session_id), tool)) and tool in grants
        if removed:
            entry = AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}")
            await self.conn.call(self.conn.events_script, [self.conn.events_key], [entry_body(entry)])
        return removed
