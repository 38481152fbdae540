"""Delegations in Redis: one hash of every delegation (kept after it ends) and one of each delegator's latest; each
given or ended with its audit entry in one script (``delegate.lua``), an end compare-and-swap on the record read."""

from __future__ import annotations

from hitl.engine.domain.delegation import Delegation
from hitl.engine.domain.records import AuditEntry
from hitl.engine.storage.codec import audit_for_delegation, audit_for_delegation_end
from hitl.engine.storage.redis.codec import entry_body, text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisDelegations"]


class RedisDelegations(RedisPart):
    """:class:`hitl.engine.ports.DelegationStore` on Redis."""

    async def _step(self, d: Delegation, entry: AuditEntry, *, now: float, before: str = "") -> tuple[bool, str]:
        keys = [self.conn.delegations_key, self.conn.delegators_key, self.conn.events_key]
        args = [d.id, d.model_dump_json(), entry_body(entry), repr(now), d.delegator, before]
        done, standing = await self.conn.call(self.conn.delegate_script, keys, args)
        return bool(int(done)), text(standing)

    async def give(self, delegation: Delegation, *, now: float) -> Delegation | None:
        entry = audit_for_delegation(delegation, now=now)
        done, standing = await self._step(delegation, entry, now=now)
        if done:
            return None
        if not standing:  # the id is taken (ids are random: never in practice)
            raise ValueError(f"a delegation {delegation.id!r} exists already")
        return Delegation.model_validate_json(standing)

    async def end(self, delegation_id: str, *, by: str, now: float) -> Delegation | None:
        raw = await self.r.hget(self.conn.delegations_key, delegation_id)
        if raw is None:
            return None
        current = Delegation.model_validate_json(text(raw))
        if not current.in_force(now):
            return None
        return await self._end(current.ended(by=by, now=now), text(raw), now)

    async def _end(self, ended: Delegation, before: str, now: float) -> Delegation | None:
        entry = audit_for_delegation_end(ended, now=now)
        done, _ = await self._step(ended, entry, now=now, before=before)
        return ended if done else None  # another process ended it first

    async def _all(self) -> list[tuple[str, Delegation]]:
        raw = await self.r.hvals(self.conn.delegations_key)
        found = [(text(v), Delegation.model_validate_json(text(v))) for v in raw]
        return sorted(found, key=lambda f: (f[1].given_at, f[1].id))

    async def active(self, *, now: float) -> list[Delegation]:
        return [d for _, d in await self._all() if d.in_force(now)]

    async def lapsed(self, *, now: float, limit: int = 100) -> list[Delegation]:
        out: list[Delegation] = []
        for raw, d in await self._all():
            if d.ended_at is None and d.until <= now and len(out) < limit:
                ended = await self._end(d.ended(by="expiry", now=d.until), raw, now)
                if ended is not None:
                    out.append(ended)
        return out
