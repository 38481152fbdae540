"""Approvals in PostgreSQL: create, read, list, decide, wait, expire, move along the state machine."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.decide import DecideCommand, apply_expiry
from hitl.engine.domain.ids import check_same_action
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.ranking import PendingOrder
from hitl.engine.domain.records import Page
from hitl.engine.errors import DecisionRefused, NotFound, StaleVersion
from hitl.engine.storage.codec import (
    audit_for_creation,
    audit_for_decision,
    decode_cursor,
    decode_rank_cursor,
)
from hitl.engine.storage.decisions import decision_writes
from hitl.engine.storage.matching import MatchingDialect, matching_query, page_of
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import load_approval
from hitl.engine.storage.postgres.schema import DUE_SOON_AT
from hitl.engine.storage.postgres.writes import Writes, read_state
from hitl.engine.storage.signals import wait_for_version

__all__ = ["RECHECK", "PgApprovals"]

RECHECK = 1.0
"""Seconds between looks at a waited-on approval when no notice came (a listener that lost its connection)."""

_MATCHING = MatchingDialect(mark=lambda n: f"${n}")
"""PostgreSQL's filtered listing, over the columns migration 17 indexes."""


class PgApprovals:
    """:class:`hitl.engine.ports.ApprovalStore` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def create(self, approval: Approval) -> tuple[Approval, bool]:
        async def tx(c: Conn) -> tuple[Approval, bool]:
            found = await read_state(c, approvals=[approval.id], chains=[approval.id])
            stored = found.approvals.get(approval.id)
            if stored is not None:
                check_same_action(stored, approval)
                return stored, False
            w = Writes(found, guarded=True)
            w.approval(approval, insert=True)
            w.audit(audit_for_creation(approval))
            await w.send(c)
            return approval, True

        stored, created = await self.db.run(tx, guarded=True)
        if created:
            self.db.changed(stored.id)  # the creation itself is announced to watchers by its NOTIFY
        return stored, created

    async def get(self, approval_id: str) -> Approval:
        return await self.db.run(lambda c: load_approval(c, approval_id), write=False)

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
        after = decode_rank_cursor(cursor) if ranked else decode_cursor(cursor)
        key = "rank" if ranked else "created_at"
        sql = f"SELECT doc, {key}, id FROM approvals WHERE status = 'pending'"
        params: list[Any] = []
        if after:
            params += list(after)
            sql += f" AND ({key}, id) > (${len(params) - 1}, ${len(params)})"
        sql += _pending_filter(roles, exclude_requester, params, now)
        return await self.db.run(
            lambda c: _page(c, sql + f" ORDER BY {key}, id", params, limit, ranked=ranked), write=False
        )

    async def count_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        cap: int = 1000,
        now: float | None = None,
    ) -> int:
        params: list[Any] = []
        where = _pending_filter(roles, exclude_requester, params, now)
        params.append(cap)
        sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM approvals WHERE status = 'pending'{where} LIMIT ${len(params)}) p"

        async def read(c: Conn) -> int:
            return int(await c.fetchval(sql, *params))

        return await self.db.run(read, write=False)

    async def list_due_soon(
        self,
        *,
        now: float,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
    ) -> list[Approval]:
        params: list[Any] = [now]
        sql = f"SELECT doc FROM approvals WHERE status = 'pending' AND {DUE_SOON_AT} < $1"
        sql += _pending_filter(roles, exclude_requester, params, now)
        params.append(limit)
        sql += f" ORDER BY {DUE_SOON_AT}, id LIMIT ${len(params)}"

        async def read(c: Conn) -> list[Approval]:
            return [Approval.model_validate_json(r[0]) for r in await c.fetch(sql, *params)]

        return await self.db.run(read, write=False)

    async def list_recent(self, *, status: Status | None = None, limit: int = 50, cursor: str | None = None) -> Page:
        before = decode_cursor(cursor)
        sql = "SELECT doc, created_at, id FROM approvals WHERE true"
        params: list[Any] = []
        if status is not None:
            params.append(str(status))
            sql += f" AND status = ${len(params)}"
        if before:
            params += list(before)
            sql += f" AND (created_at, id) < (${len(params) - 1}, ${len(params)})"
        sql += " ORDER BY created_at DESC, id DESC"
        return await self.db.run(lambda c: _page(c, sql, params, limit), write=False)

    async def list_matching(self, where: ApprovalFilter, *, limit: int = 50, cursor: str | None = None) -> Page:
        # Every filter in the query: the planner reads the indexes of migration 17 (tool, tier, requester, decided,
        # who decided what), so a page holds `limit` rows whenever that many match.
        sql, params = matching_query(where, decode_cursor(cursor), limit, _MATCHING)

        async def read(c: Conn) -> Page:
            return page_of(await c.fetch(sql, *params), limit)

        return await self.db.run(read, write=False)

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        async def tx(c: Conn) -> Approval | DecisionRefused | StaleVersion:
            # The approval and its chain's head in one read; the decision's rows in one write.
            found = await read_state(c, approvals=[cmd.approval_id], chains=[cmd.approval_id])
            current = found.approvals.get(cmd.approval_id)
            if current is None:
                raise NotFound.approval(cmd.approval_id)
            writes = decision_writes(current, cmd, now, wall=time.time())
            w = Writes(found, guarded=True)
            if writes.approval is not None:
                w.approval(writes.approval)
            if writes.reviewer is not None:
                w.reviewers([writes.reviewer])
            w.audit(writes.audit)
            for kind, payload in writes.jobs:
                w.job(kind, payload, now)
            if writes.trust is not None:
                w.grant(writes.trust)
            await w.send(c)
            return writes.outcome  # a refusal is committed with its audit line, then raised

        out = await self.db.run(tx, guarded=True)
        if isinstance(out, DecisionRefused | StaleVersion):
            raise out
        self.db.changed(out.id)
        return out

    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        # A change committed anywhere is announced (NOTIFY) and wakes the waiter; a look every RECHECK seconds
        # covers a notice lost with a listener's connection.
        return await wait_for_version(
            approval_id,
            signal=self.db.change_signal,
            read=self.get,
            after_version=after_version,
            timeout=timeout,
            recheck=RECHECK,
        )

    async def wait_created(self, *, timeout: float) -> list[str]:
        # The first call starts watching (what was created before it is the caller's sweep's business).
        if self.db.watching_created:
            return await self.db.take_created(timeout=timeout)
        await self.db.run(_reachable, write=False)  # the pool and its listener are open: listening from now on
        self.db.watch_created()
        return []

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        async def tx(c: Conn) -> list[Approval]:
            rows = await c.fetch(
                "SELECT doc FROM approvals WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at LIMIT $2",
                now,
                limit,
            )
            out = []
            w = Writes()
            for (doc,) in rows:
                expired = apply_expiry(Approval.model_validate_json(doc), now)
                if expired is not None:
                    w.approval(expired)
                    w.audit(audit_for_decision(expired, actor="system", event="expired", now=now))
                    out.append(expired)
            await w.send(c)
            return out

        expired = await self.db.run(tx)
        self.db.changed(*(a.id for a in expired))
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
        async def tx(c: Conn) -> Approval:
            current = await load_approval(c, approval_id)
            updated = claim_rules.transitioned(
                current,
                target=target,
                expected_version=expected_version,
                now=now,
                reason=reason,
                superseded_by=superseded_by,
            )
            w = Writes()
            w.approval(updated)
            w.audit(audit_for_decision(updated, actor=actor, event=str(target), now=now, detail=reason or ""))
            await w.send(c)
            return updated

        updated = await self.db.run(tx)
        self.db.changed(updated.id)
        return updated


async def _reachable(c: Conn) -> None:
    await c.fetchval("SELECT 1")


def _pending_filter(
    roles: Collection[str] | None, exclude_requester: str | None, params: list[Any], now: float | None
) -> str:
    """The ``AND`` clauses of the pending approvals a reviewer may decide (with ``now``: those handed on to one of
    their roles by then too), their parameters appended to ``params``."""
    sql = ""
    if roles is not None:
        params.append(list(roles))
        mine = f"${len(params)}::text[]"
        handed = ""
        if now is not None:
            params.append(now)
            handed = f" OR (backup_role = ANY({mine}) AND hand_on_at <= ${len(params)})"
        sql += f" AND (required_role IS NULL OR required_role = ANY({mine}){handed})"
    if exclude_requester:
        params.append(exclude_requester)
        sql += f" AND requester != ${len(params)}"
    return sql


async def _page(c: Conn, sql: str, params: list[Any], limit: int, *, ranked: bool = False) -> Page:
    """``limit`` approvals of an ordered ``SELECT doc, <key>, id``, and the cursor after the last one."""
    rows = await c.fetch(f"{sql} LIMIT ${len(params) + 1}", *params, limit + 1)
    return page_of(rows, limit, ranked=ranked)
