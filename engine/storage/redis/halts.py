"""The stop switch's orders in Redis: one hash (scope -> order), each change and its audit entry one script."""

from __future__ import annotations

from hitl.engine.domain.halts import HaltOrder
from hitl.engine.storage.codec import audit_for_halt
from hitl.engine.storage.redis.codec import entry_body, text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisHalts"]


class RedisHalts(RedisPart):
    """:class:`hitl.engine.ports.HaltOrders` on Redis."""

    async def halt(self, order: HaltOrder) -> None:
        entry = entry_body(audit_for_halt(order, "halted"))
        await self.conn.call(
            self.conn.halt_script,
            [self.conn.halts_key, self.conn.events_key],
            [order.scope, order.model_dump_json(), entry],
        )

    async def lift(self, scope: str, *, by: str, now: float) -> HaltOrder | None:
        current = await self.r.hget(self.conn.halts_key, scope)
        if current is None:
            return None
        order = HaltOrder.model_validate_json(text(current))
        entry = entry_body(audit_for_halt(order.model_copy(update={"by": by, "at": now}), "unhalted"))
        done, before = await self.conn.call(
            self.conn.halt_script, [self.conn.halts_key, self.conn.events_key], [scope, "", entry]
        )
        return HaltOrder.model_validate_json(text(before)) if int(done) else None

    async def active(self) -> list[HaltOrder]:
        raw = await self.r.hgetall(self.conn.halts_key)
        return sorted((HaltOrder.model_validate_json(text(v)) for v in raw.values()), key=lambda o: o.scope)
