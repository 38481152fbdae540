"""Session trust, rolling windows, the audit trail and card message references in Redis."""

from __future__ import annotations

import json

from engine.domain.policy import WindowStats
from engine.domain.records import AuditEntry, MessageRef, TrustGrant
from engine.storage.redis_base import RedisBase
from engine.storage.redis_codec import _s

__all__ = ["RedisRecords"]


class RedisRecords(RedisBase):
    # -- trust ------------------------------------------------------------------------------------------
    def _tk(self, session_id: str) -> str:
        return f"{self.p}:trust:{{{session_id}}}"

    async def grant_trust(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self._tk(session_id), tool, json.dumps([until, by]))
            pipe.sadd(f"{self.p}:trust-sessions", session_id)
            pipe.xadd(
                f"{self.p}:audit",
                {
                    "e": AuditEntry(
                        at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}"
                    ).model_dump_json()
                },
            )
            await pipe.execute()

    async def list_trust(self, session_id: str, *, now: float) -> list[TrustGrant]:
        raw = await self.r.hgetall(self._tk(session_id))
        out = []
        for tool, val in raw.items():
            until, by = json.loads(val)
            if until > now:
                out.append(TrustGrant(session_id=session_id, tool=_s(tool), granted_by=by, until=until))
        return sorted(out, key=lambda g: g.tool)

    async def list_all_trust(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        out: list[TrustGrant] = []
        for session_id in sorted(_s(x) for x in await self.r.smembers(f"{self.p}:trust-sessions")):
            grants = await self.list_trust(session_id, now=now)
            if not grants:
                await self.r.srem(f"{self.p}:trust-sessions", session_id)
            out += grants
            if len(out) >= limit:
                break
        return out[:limit]

    async def revoke_trust(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        grants = {g.tool for g in await self.list_trust(session_id, now=now)}
        removed = bool(await self.r.hdel(self._tk(session_id), tool)) and tool in grants
        if removed:
            await self.append_audit(
                AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}")
            )
        return removed

    # -- rolling windows --------------------------------------------------------------------------------
    async def window_add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        out = await self._call(
            self._window,
            [f"{self.p}:win:{{{key}}}"],
            [repr(now), repr(now - window), f"{event_id}|{amount!r}", int(window) + 1, event_id],
        )
        return WindowStats(count=int(_s(out[0])), total=float(_s(out[1])))

    async def window_stats(self, key: str, *, now: float, window: float) -> WindowStats:
        out = await self._call(self._window, [f"{self.p}:win:{{{key}}}"], [repr(now), repr(now - window), "", 0, ""])
        return WindowStats(count=int(_s(out[0])), total=float(_s(out[1])))

    # -- audit and messages -----------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        if entry.approval_id:
            await self.r.rpush(self._ak(entry.approval_id), entry.model_dump_json())
        else:
            await self.r.xadd(f"{self.p}:audit", {"e": entry.model_dump_json()})

    async def audit(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        if approval_id:
            rows = await self.r.lrange(self._ak(approval_id), 0, limit - 1)
            return [AuditEntry.model_validate_json(r).model_copy(update={"seq": i + 1}) for i, r in enumerate(rows)]
        # The global view merges the newest approvals' logs with session-level events.
        ids = [_s(m) for m in await self.r.zrevrange(f"{self.p}:all", 0, limit - 1)]
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                pipe.lrange(self._ak(aid), 0, -1)
            pipe.xrevrange(f"{self.p}:audit", count=limit)
            *logs, stream = await pipe.execute()
        entries = [AuditEntry.model_validate_json(r) for log in logs for r in log]
        entries += [AuditEntry.model_validate_json(fields[b"e" if b"e" in fields else "e"]) for _, fields in stream]
        entries.sort(key=lambda e: e.at)
        return entries[-limit:]

    async def set_message(self, approval_id: str, ref: MessageRef) -> None:
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.hset(f"{self.p}:{{{approval_id}}}:msg", mapping={"channel": ref.channel, "ts": ref.ts})
            pipe.set(f"{self.p}:msgref:{ref.channel}:{ref.ts}", approval_id)
            await pipe.execute()

    async def get_message(self, approval_id: str) -> MessageRef | None:
        f = {_s(k): _s(v) for k, v in (await self.r.hgetall(f"{self.p}:{{{approval_id}}}:msg")).items()}
        return MessageRef(channel=f["channel"], ts=f["ts"]) if f else None

    async def approval_for_message(self, ref: MessageRef) -> str | None:
        v = await self.r.get(f"{self.p}:msgref:{ref.channel}:{ref.ts}")
        return _s(v) if v is not None else None
