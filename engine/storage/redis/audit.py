"""The audit trail in Redis: each approval's list (written by the same scripts that change it) and a stream
of entries that belong to no approval. Approvals are found from two indexes: the stored ones, and those retention
removed while their chain is kept (see :mod:`hitl.engine.domain.retention`)."""

from __future__ import annotations

from typing import Any, cast

from hitl.engine.domain.audit_heads import (
    EVENTS,
    Head,
    chain_name,
    check_anchor,
    compare_heads,
    head_digest,
    view_break,
)
from hitl.engine.domain.records import AuditBreak, AuditEntry, chain_link
from hitl.engine.domain.retention import anchor_of
from hitl.engine.storage.redis.codec import entry_body, split_link, text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisAudit"]


class RedisAudit(RedisPart):
    """:class:`hitl.engine.ports.AuditLog` on Redis."""

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

    async def verify(self, *, head: str | None = None) -> tuple[int, AuditBreak | None]:
        c = self.conn
        ids = [text(m) for m in await self.r.zrange(c.all_key, 0, -1)]
        ids += [text(m) for m in await self.r.zrange(c.chains_key, 0, -1)]
        if not await self.r.exists(c.heads_kept_key):
            await self._keep_heads(ids)
        chains: list[tuple[str, list[str]]] = []
        recorded: dict[str, Head] = {}
        for start in range(0, len(ids), 200):
            part = ids[start : start + 200]
            async with self.r.pipeline(transaction=False) as pipe:
                for aid in part:
                    pipe.lrange(c.audit_key(aid), 0, -1)
                    pipe.hmget(c.head_key(c.audit_key(aid)), ["n", "link"])
                got = await pipe.execute()
            for aid, log, (n, link) in zip(part, got[::2], got[1::2], strict=True):
                chains.append((aid, [text(x) for x in log]))
                if n is not None:
                    recorded[aid] = (int(n), text(link or ""))
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.xrange(c.events_key)
            pipe.hmget(c.head_key(c.events_key), ["n", "link"])
            stream, (n, link) = await pipe.execute()
        if n is not None:
            recorded[EVENTS] = (int(n), text(link or ""))
        events = [text(fields.get("e", "")) for _, fields in cast(list[tuple[Any, dict[str, Any]]], stream)]
        checked = 0
        links: dict[str, list[str]] = {}
        for chain, stored in [*chains, (EVENTS, events)]:
            if not stored and chain != EVENTS:
                reason = "the approval's audit entries are missing"
                return checked, AuditBreak(chain=chain, position=1, reason=reason, checked=checked)
            prev = _anchor(events) if chain == EVENTS else ""
            for position, element in enumerate(stored, start=1):
                parts = split_link(element)
                if parts is None:
                    reason = "the entry carries no link (written or replaced outside hitl)"
                    return checked, AuditBreak(
                        chain=chain_name(chain), position=position, reason=reason, checked=checked
                    )
                body, claimed_prev, link = parts
                if claimed_prev != prev:
                    reason = "an entry before it was removed or moved"
                    return checked, AuditBreak(
                        chain=chain_name(chain), position=position, reason=reason, checked=checked
                    )
                if link != chain_link(prev, body):
                    reason = "the entry was changed"
                    return checked, AuditBreak(
                        chain=chain_name(chain), position=position, reason=reason, checked=checked
                    )
                wrong_view = view_break(AuditEntry.model_validate_json(body)) if '"view' in body else None
                if wrong_view is not None:
                    return checked, AuditBreak(
                        chain=chain_name(chain), position=position, reason=wrong_view, checked=checked
                    )
                prev = link
                links.setdefault(chain, []).append(link)
                checked += 1
        found = {k: (len(v), v[-1]) for k, v in links.items()}
        broken = compare_heads(found, recorded, checked)
        if broken is None and head is not None:
            broken = check_anchor(head, await self._taken(head), links, checked)
        return checked, broken

    async def take_head(self) -> str:
        c = self.conn
        ids = [text(m) for m in await self.r.zrange(c.all_key, 0, -1)]
        ids += [text(m) for m in await self.r.zrange(c.chains_key, 0, -1)]
        heads: dict[str, Head] = {}
        keys = [(EVENTS, c.events_key), *((aid, c.audit_key(aid)) for aid in ids)]
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            async with self.r.pipeline(transaction=False) as pipe:
                for _, key in part:
                    pipe.hmget(c.head_key(key), ["n", "link"])
                got = await pipe.execute()
            heads |= {chain: (int(n), text(lk or "")) for (chain, _), (n, lk) in zip(part, got, strict=True) if n}
        digest = head_digest(heads)
        if heads:
            await self.r.hset(c.anchor_key(digest), mapping={k or "-": f"{n} {lk}" for k, (n, lk) in heads.items()})
        return digest

    async def _taken(self, digest: str) -> dict[str, Head] | None:
        raw = await self.r.hgetall(self.conn.anchor_key(digest))
        if not raw:
            return None
        out: dict[str, Head] = {}
        for k, v in raw.items():
            n, _, link = text(v).partition(" ")
            out["" if text(k) == "-" else text(k)] = (int(n), link)
        return out

    async def _keep_heads(self, ids: list[str]) -> None:
        """Give every chain an older hitl wrote its head, from the chain as it is (once per store)."""
        c = self.conn
        chains = [c.events_key, *(c.audit_key(aid) for aid in ids)]
        for start in range(0, len(chains), 200):
            part = chains[start : start + 200]
            keys = [k for chain in part for k in (chain, c.head_key(chain))]
            await c.call(c.heads_script, keys, ["1" if start == 0 else "0"])
        await self.r.set(c.heads_kept_key, "1")


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
