"""Trust grants in Redis: a hash per session (``[requester, tool]`` -> ``[until, by]``), plus the set of sessions
that have grants. A reviewer's Trust writes its grant in the decision's script (``decide.lua``)."""

from __future__ import annotations

import json

from hitl.engine.domain.records import TrustGrant
from hitl.engine.storage.codec import audit_for_grant, audit_for_revocation
from hitl.engine.storage.redis.codec import entry_body, text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisTrust", "grant_field"]


def grant_field(requester: str, tool: str) -> str:
    """The field of a session's grants hash for ``requester``'s grant of ``tool`` (the script builds the same)."""
    return json.dumps([requester, tool], separators=(",", ":"), ensure_ascii=False)


class RedisTrust(RedisPart):
    """:class:`hitl.engine.ports.TrustStore` on Redis; grants and revocations are audited."""

    async def grant(self, grant: TrustGrant, *, now: float) -> None:
        entry = audit_for_grant(grant, now=now)
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(
                self.conn.trust_key(grant.session_id),
                grant_field(grant.requester, grant.tool),
                json.dumps([grant.until, grant.granted_by]),
            )
            pipe.sadd(self.conn.trust_sessions_key, grant.session_id)
            await pipe.execute()
        await self.conn.call(self.conn.events_script, [self.conn.events_key], [entry_body(entry)])

    async def _grants(self, session_id: str, *, now: float) -> list[TrustGrant]:
        out = []
        for field, val in (await self.r.hgetall(self.conn.trust_key(session_id))).items():
            until, by = json.loads(val)
            requester, tool = json.loads(text(field))
            if until > now:
                out.append(
                    TrustGrant(session_id=session_id, requester=requester, tool=tool, granted_by=by, until=until)
                )
        return sorted(out, key=lambda g: (g.requester, g.tool))

    async def active(self, session_id: str, *, requester: str, now: float) -> list[TrustGrant]:
        return [g for g in await self._grants(session_id, now=now) if g.requester == requester]

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        out: list[TrustGrant] = []
        for session_id in sorted(text(x) for x in await self.r.smembers(self.conn.trust_sessions_key)):
            out += await self._grants(session_id, now=now)  # lapsed grants stay until retention removes them
            if len(out) >= limit:
                break
        return out[:limit]

    async def revoke(self, session_id: str, tool: str, *, requester: str | None = None, by: str, now: float) -> int:
        ending = [
            g
            for g in await self._grants(session_id, now=now)
            if g.tool == tool and (requester is None or g.requester == requester)
        ]
        if not ending:
            return 0
        removed = int(
            await self.r.hdel(self.conn.trust_key(session_id), *(grant_field(g.requester, tool) for g in ending))
        )
        if removed:
            entry = audit_for_revocation(session_id, tool, requester=requester, by=by, now=now)
            await self.conn.call(self.conn.events_script, [self.conn.events_key], [entry_body(entry)])
        return removed
