"""Approvals in Redis: create, read, list, decide, expire, move along the state machine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from typing import Any, cast

from redis.asyncio.client import Pipeline, PubSub

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.decide import DecideCommand, refusal, trust_note
from hitl.engine.domain.execution import stale_approval
from hitl.engine.domain.ids import check_same_action
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Reviewer, Status
from hitl.engine.domain.presentation import digest_of
from hitl.engine.domain.ranking import PendingOrder, due_soon_at, rank_key
from hitl.engine.domain.records import Page, TrustGrant
from hitl.engine.domain.states import check_transition, sources_of
from hitl.engine.errors import ErrorCode, NotFound
from hitl.engine.storage.codec import (
    audit_for_creation,
    decode_cursor,
    decode_rank_cursor,
    encode_cursor,
    encode_json_form,
    encode_rank_cursor,
)
from hitl.engine.storage.redis.codec import approval_from_result, approval_to_fields, entry_body, static_doc, text
from hitl.engine.storage.redis.connection import ANY_ROLE, DYNAMIC_FIELDS, RedisConnection, waits
from hitl.engine.storage.redis.filters import index_filters, matching_page
from hitl.engine.storage.redis.part import RedisPart
from hitl.engine.storage.redis.trust import grant_field

__all__ = ["RedisApprovals", "queue_read", "read_result"]


class RedisApprovals(RedisPart):
    """:class:`hitl.engine.ports.ApprovalStore` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__(conn)
        self.p = conn.p
        self._created: PubSub | None = None
        """The subscription :meth:`wait_created` keeps between calls (nothing announced in between is lost)."""

    async def create(self, approval: Approval) -> tuple[Approval, bool]:
        fields = approval_to_fields(approval)
        entry = audit_for_creation(approval)
        args: list[Any] = [entry_body(entry), static_doc(approval), repr(due_soon_at(approval))]
        for k, v in fields.items():
            args += [k, v]

        def build(pipe: Pipeline) -> None:
            # Indexes first: a crash between the two leaves a dangling index entry (repaired on read),
            # never an approval that no index knows about.
            pipe.zadd(self.conn.pending_key(approval.required_role), {approval.id: approval.created_at}, nx=True)
            pipe.zadd(self.conn.ranked_key(approval.required_role), {approval.id: rank_key(approval)}, nx=True)
            pipe.zadd(f"{self.p}:due", {approval.id: approval.expires_at}, nx=True)
            pipe.zadd(self.conn.all_key, {approval.id: approval.created_at}, nx=True)
            pipe.sadd(f"{self.p}:pending-roles", approval.required_role or ANY_ROLE)
            index_filters(pipe, self.conn, approval)
            pipe.evalsha(self.conn.create_script.sha, 3, *self.conn.approval_keys(approval.id), *args)

        out = await self.conn.pipeline(build, [self.conn.create_script])
        res = list(out[-1])
        if text(res[0]) == "created":
            return approval, True
        stored = approval_from_result(res)
        check_same_action(stored, approval)
        return stored, False

    async def get(self, approval_id: str) -> Approval:
        found = (await self._fetch([approval_id]))[0]
        if found is None:
            raise NotFound.approval(approval_id)
        return found

    async def _fetch(self, ids: list[str]) -> list[Approval | None]:
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                queue_read(pipe, self.conn, aid)
            rows = await pipe.execute()
        return [read_result(rows[i], rows[i + 1]) for i in range(0, len(rows), 2)]

    async def list_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        order: PendingOrder = "age",
        now: float | None = None,
    ) -> Page:
        ranked = order == "rank"
        after: tuple[float, str] | tuple[int, str] | None = (
            decode_rank_cursor(cursor) if ranked else decode_cursor(cursor)
        )
        index_keys = await self._indexes(roles, ranked=ranked)
        args = [
            (str(after[0]) if ranked else repr(after[0])) if after else "",
            after[1] if after else "",
            limit + 1,
            exclude_requester or "",
            f"{self.p}:{{",
            "",
            *_filter(roles, now),
        ]
        out = [text(x) for x in await self.conn.call(self.conn.page_script, index_keys, args)]
        n = int(out[0])
        rows = [out[1 + 10 * i : 11 + 10 * i] for i in range(n)]
        page = [r for r in rows[:limit] if r[2]]  # a document not (yet) written: created index-first, skipped
        nxt = None
        if n > limit:
            score, last = rows[limit - 1][1], rows[limit - 1][0]
            nxt = encode_rank_cursor(int(float(score)), last) if ranked else encode_cursor(float(score), last)
        return Page(items=[approval_from_result(["", "", *r[2:]]) for r in page], cursor=nxt)

    async def count_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        cap: int = 1000,
        now: float | None = None,
    ) -> int:
        args = ["", "", cap, exclude_requester or "", f"{self.p}:{{", "count", *_filter(roles, now)]
        out = await self.conn.call(self.conn.page_script, await self._indexes(roles, ranked=True), args)
        return int(text(out[0]))

    async def list_due_soon(
        self,
        *,
        now: float,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
    ) -> list[Approval]:
        # One index for every role, scored by when each becomes due soon: the page script reads it up to `now`.
        mine = [] if roles is None else ["1", *roles]
        args = ["", "", limit, exclude_requester or "", f"{self.p}:{{", "soon", repr(now), *mine]
        out = [text(x) for x in await self.conn.call(self.conn.page_script, [self.conn.soon_key], args)]
        rows = [out[1 + 10 * i : 11 + 10 * i] for i in range(int(out[0]))]
        return [approval_from_result(["", "", *r[2:]]) for r in rows if r[2]]

    async def _indexes(self, roles: Collection[str] | None, *, ranked: bool) -> list[str]:
        """The index of each role a reviewer of ``roles`` may decide for (None: every role that ever had a pending
        approval, a small set; no keyspace scan)."""
        key = self.conn.ranked_key if ranked else self.conn.pending_key
        if roles is None:
            names = sorted(text(x) for x in await self.r.smembers(f"{self.p}:pending-roles"))
            return [key(None if r == ANY_ROLE else r) for r in names]
        return [key(None), *(key(r) for r in roles)]

    async def list_recent(self, *, status: Status | None = None, limit: int = 50, cursor: str | None = None) -> Page:
        # The creation-time index of every approval, newest first; statuses are read from each approval, so a
        # filtered page stops after scanning a bounded number of entries and says where to continue.
        before = decode_cursor(cursor)
        budget = limit * 10 + 200
        hi: float | str = before[0] if before else "+inf"
        offset, scanned = 0, 0
        out: list[Approval] = []
        last: tuple[float, str] | None = None
        while scanned < budget:
            batch = cast(
                list[tuple[Any, float]],
                await self.r.zrevrangebyscore(
                    self.conn.all_key, hi, "-inf", start=offset, num=limit + 1, withscores=True
                ),
            )
            if not batch:
                return Page(items=out, cursor=None)
            offset += len(batch)
            ids = [(text(m), float(sc)) for m, sc in batch]
            ids = [(m, sc) for m, sc in ids if before is None or (sc, m) < before]
            for (m, sc), a in zip(ids, await self._fetch([m for m, _ in ids]), strict=True):
                scanned += 1
                if a is None or (status is not None and a.status is not status):
                    last = (sc, m)
                    continue
                if len(out) == limit:
                    assert last is not None
                    return Page(items=out, cursor=encode_cursor(*last))
                out.append(a)
                last = (sc, m)
        return Page(items=out, cursor=encode_cursor(*last) if last is not None else None)

    async def list_matching(self, where: ApprovalFilter, *, limit: int = 50, cursor: str | None = None) -> Page:
        # The smallest index the filters name, the rest checked on each approval read, bounded (.filters says how).
        return await matching_page(self.conn, self._fetch, where, limit=limit, cursor=decode_cursor(cursor))

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        decision = {
            "reviewer": cmd.reviewer.id,
            "kind": str(cmd.kind),
            "at": now,
            "version": cmd.expected_version,
            "reason": cmd.reason,
            "args": cmd.args,
            "via": cmd.via,
        }
        if cmd.consequence is not None and cmd.kind is DecisionKind.MODIFY and not cmd.supersede_with:
            decision["consequence"] = cmd.consequence.canonical()  # as apply_decision keeps it
        packed = [
            repr(now),
            str(cmd.expected_version),
            cmd.expected_hash,
            cmd.reviewer.id,
            str(cmd.kind),
            json.dumps(decision, separators=(",", ":"), ensure_ascii=False),
            cmd.reason or "",
            json.dumps(cmd.args) if cmd.args is not None else "",
            cmd.supersede_with or "",
            cmd.via,
            cmd.approval_id,
            "" if cmd.answer_by is None else repr(cmd.answer_by + await self.conn.clock_offset()),
            cmd.note,
            digest_of(cmd.view) if cmd.view is not None else "",
            json.dumps(cmd.view, separators=(",", ":"), ensure_ascii=False) if cmd.view is not None else "",
            "1" if cmd.attended else "",
            "\n".join(sorted(cmd.reviewer.linked)),
            *_role_entries(cmd.reviewer),
        ]
        # A list of strings (the decision and edited arguments are encoded above, by json, which keeps whatever a
        # caller's numbers are): orjson encodes the same JSON value in a fraction of the time.
        args = [encode_json_form(packed), self.conn.channel(cmd.approval_id)]
        keys = self.conn.approval_keys(cmd.approval_id)
        if cmd.jobs or cmd.run_jobs:
            keys += [self.conn.jobs_key(kind) for kind in (*cmd.jobs, *cmd.run_jobs)]
        args += [json.dumps({"approval_id": cmd.approval_id}), str(len(cmd.jobs))]
        if cmd.kind is DecisionKind.TRUST and cmd.trust_until is not None:
            keys, args = await self._with_grant(cmd, keys, args)
        out = await self.conn.call(self.conn.decide_script, keys, args)
        tag = text(out[0])
        if tag == "missing":
            raise NotFound.approval(cmd.approval_id)
        approval = approval_from_result(out)
        if tag == "ok":
            return approval
        raise refusal(ErrorCode(text(out[1])), approval, cmd.reviewer.id)

    async def _with_grant(self, cmd: DecideCommand, keys: list[str], args: list[Any]) -> tuple[list[str], list[Any]]:
        """A trust's script call with the grant it writes if it approves: the session's grants hash and the set of
        sessions as the last keys, the grant as arguments. The grant's session, requester and tool are read first
        (they never change once an approval exists); the script still decides whether the grant is written."""
        assert cmd.trust_until is not None
        current = await self.get(cmd.approval_id)
        if current.kind is not ApprovalKind.ACTION:  # its Trust grants nothing (trust_granted says the same)
            return keys, args
        grant = TrustGrant(
            session_id=current.session_id,
            requester=current.requester,
            tool=current.tool,
            granted_by=cmd.reviewer.id,
            until=cmd.trust_until,
        )
        c = self.conn
        value = json.dumps([grant.until, grant.granted_by])
        return (
            [*keys, c.trust_key(grant.session_id), c.trust_sessions_key],
            [*args, grant_field(grant.requester, grant.tool), value, grant.session_id, trust_note(grant)],
        )

    @waits
    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pubsub = self.r.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.conn.channel(approval_id))
            while True:
                # Read after subscribing, so a change between the two cannot be missed.
                current = await self.get(approval_id)
                left = deadline - loop.time()
                if current.version > after_version or left <= 0:
                    return current
                await pubsub.get_message(timeout=left)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    @waits
    async def wait_created(self, *, timeout: float) -> list[str]:
        if self._created is None:
            self._created = self.r.pubsub(ignore_subscribe_messages=True)
            await self._created.subscribe(self.conn.created_channel)
            return []
        ids: list[str] = []
        message = await self._created.get_message(timeout=timeout)
        while message is not None:  # everything announced so far, in one answer
            ids.append(text(message["data"]))
            message = await self._created.get_message(timeout=0)
        return ids

    async def close(self) -> None:
        """Release the subscription, if any."""
        if self._created is not None:
            await self._created.aclose()  # type: ignore[no-untyped-call]
            self._created = None

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        due = [text(m) for m in await self.r.zrangebyscore(f"{self.p}:due", "-inf", now, start=0, num=limit)]
        if not due:
            return []

        def build(pipe: Pipeline) -> None:
            for aid in due:
                pipe.evalsha(
                    self.conn.transition_script.sha,
                    3,
                    *self.conn.approval_keys(aid),
                    *[
                        repr(now),
                        "expired",
                        "",
                        "system",
                        "expired without a decision",
                        aid,
                        "",
                        self.conn.channel(aid),
                        "",
                        "pending",
                    ],
                )

        results = await self.conn.pipeline(build, [self.conn.transition_script])
        expired = [approval_from_result(list(r)) for r in results if text(r[0]) == "ok"]
        await self.r.zrem(f"{self.p}:due", *due)  # decided, expired or missing: none is due any more
        return expired

    async def transition(
        self,
        approval_id: str,
        *,
        target: Status,
        expected_version: int | None,
        actor: str,
        now: float,
        reason: str | None = None,
        superseded_by: str | None = None,
    ) -> Approval:
        args = [
            repr(now),
            str(target),
            "" if expected_version is None else expected_version,
            actor,
            reason or "",
            approval_id,
            reason or "",
            self.conn.channel(approval_id),
            superseded_by or "",
            *sorted(str(s) for s in sources_of(target)),
        ]
        out = await self.conn.call(self.conn.transition_script, self.conn.approval_keys(approval_id), args)
        tag = text(out[0])
        if tag == "missing":
            raise NotFound.approval(approval_id)
        if tag == "stale":
            raise stale_approval(approval_id, int(text(out[2])), expected_version)
        if tag == "illegal":  # the script checked the sources the table allows: the table names both states
            check_transition(Status(text(out[1])), target, approval_id=approval_id)
            raise AssertionError("the state table and transition.lua disagree")
        return approval_from_result(out)


def _filter(roles: Collection[str] | None, now: float | None) -> list[str]:
    """The page script's last arguments: ``now`` ('' for none) and the roles asked for (none: every role)."""
    if roles is None:
        return []
    return [repr(now) if now is not None else "", "1", *roles]


def queue_read(pipe: Pipeline, conn: RedisConnection, approval_id: str) -> None:
    """Queue the two reads of one approval on ``pipe`` (its document, its changing fields); :func:`read_result`
    turns their two replies into the approval. Other reads can share the round trip."""
    pipe.get(conn.doc_key(approval_id))
    pipe.hmget(conn.approval_key(approval_id), DYNAMIC_FIELDS)


def read_result(doc: Any, dynamic: Any) -> Approval | None:
    """The approval from the two replies :func:`queue_read` queued; None when there is no such approval."""
    return None if doc is None or dynamic[0] is None else approval_from_result(["", "", doc, *dynamic])


def _role_entries(reviewer: Reviewer) -> list[str]:
    """The reviewer's roles as ``decide.lua`` reads them: ``name`` when their own, ``name<TAB>delegator`` when a
    delegation in force hands it to them; by name (the script takes the first delegated one, as Python does)."""
    delegated = dict(reviewer.delegated)
    return [role if role not in delegated else f"{role}\t{delegated[role]}" for role in sorted(reviewer.roles)]
