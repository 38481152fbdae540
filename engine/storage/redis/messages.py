"""Card message references in Redis, both ways."""

from __future__ import annotations

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import MessageRef
from hitl.engine.errors import NotFound
from hitl.engine.storage.redis.approvals import read_result
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.connection import DYNAMIC_FIELDS
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisMessages"]


class RedisMessages(RedisPart):
    """:class:`hitl.engine.ports.MessageMap` on Redis."""

    def _by_approval(self, approval_id: str) -> str:
        return self.conn.message_key(approval_id)

    def _by_message(self, ref: MessageRef) -> str:
        return self.conn.message_shown_key(ref.channel, ref.ts)

    async def set(self, approval_id: str, ref: MessageRef) -> None:
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.hset(self._by_approval(approval_id), mapping={"channel": ref.channel, "ts": ref.ts})
            pipe.zadd(self._by_message(ref), {approval_id: 0})  # one sorted set: its members in id order
            await pipe.execute()

    async def get(self, approval_id: str) -> MessageRef | None:
        f = {text(k): text(v) for k, v in (await self.r.hgetall(self._by_approval(approval_id))).items()}
        return MessageRef(channel=f["channel"], ts=f["ts"]) if f else None

    async def card(self, approval_id: str) -> tuple[MessageRef, Approval] | None:
        conn = self.conn
        keys = [self._by_approval(approval_id), conn.doc_key(approval_id), conn.approval_key(approval_id)]
        out = await conn.call(conn.card_script, keys, DYNAMIC_FIELDS)  # one script: the three reads, one step
        if out[0] is None:
            return None
        channel, ts, doc, *dynamic = out
        approval = read_result(doc, dynamic)
        if approval is None:
            raise NotFound.approval(approval_id)
        return MessageRef(channel=text(channel), ts=text(ts)), approval

    async def approval_for(self, ref: MessageRef) -> str | None:
        shown = await self.shown_on(ref)
        return shown[0] if shown else None

    async def shown_on(self, ref: MessageRef) -> list[str]:
        shown = [text(m) for m in await self.r.zrange(self._by_message(ref), 0, -1)]
        if shown:
            return shown
        older = await self.r.get(self.conn.message_ref_key(ref.channel, ref.ts))  # a card an older hitl posted
        return [text(older)] if older is not None else []
