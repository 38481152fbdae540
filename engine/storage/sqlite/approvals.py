"""Approvals in SQLite: create, read, list, decide, wait, expire, move along the state machine."""

from __future__ import annotations

import asyncio
import sqlite3
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
from hitl.engine.errors import DecisionRefused, StaleVersion
from hitl.engine.storage.codec import (
    audit_for_creation,
    audit_for_decision,
    decode_cursor,
    decode_rank_cursor,
)
from hitl.engine.storage.decisions import decision_writes
from hitl.engine.storage.matching import MatchingDialect, matching_query, page_of
from hitl.engine.storage.signals import wait_for_version
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit, insert_job, insert_reviewers, load_approval, write_approval
from hitl.engine.storage.sqlite.schema import DUE_SOON_AT
from hitl.engine.storage.sqlite.trust import insert_grant

__all__ = ["CREATED_POLL", "SqliteApprovals"]

CREATED_POLL = 0.05
"""Seconds between checks for approvals other processes created (:meth:`SqliteApprovals.wait_created`)."""

_MATCHING = MatchingDialect(mark=lambda _: "?", merges_decided=True)
"""SQLite's filtered listing, over the columns schema 21 indexes (:data:`~.schema.FILTERS`); every decided approval
from the status index (schema 22 dropped the decided one)."""


class SqliteApprovals:
    """:class:`hitl.engine.ports.ApprovalStore` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db
        self._seen: int | None = None
        """The newest approval row :meth:`wait_created` has reported (None: not watching yet)."""

    async def create(self, approval: Approval) -> tuple[Approval, bool]:
        def tx(c: sqlite3.Connection) -> tuple[Approval, bool]:
            row = c.execute("SELECT doc FROM approvals WHERE id = ?", (approval.id,)).fetchone()
            if row:
                stored = Approval.model_validate_json(row[0])
                check_same_action(stored, approval)
                return stored, False
            write_approval(c, approval, insert=True)
            insert_audit(c, audit_for_creation(approval))
            return approval, True

        stored, created = await self.db.run(tx)
        if created:
            self.db.changed(stored.id)
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

        def tx(c: sqlite3.Connection) -> Page:
            # In rank order SQLite's planner, with no statistics, reads every pending row through the status index and
            # sorts them: named, the ranked index gives a page in rank order at the cost of the page.
            hint = " INDEXED BY approvals_ranked" if ranked else ""
            sql = f"SELECT doc, {key}, id FROM approvals{hint} WHERE status = 'pending'"
            params: list[Any] = []
            if after:
                sql += f" AND ({key}, id) > (?, ?)"
                params += list(after)
            where, more = _pending_filter(roles, exclude_requester, now)
            return _page(c, f"{sql}{where} ORDER BY {key}, id", [*params, *more], limit, ranked=ranked)

        return await self.db.run(tx, write=False)

    async def count_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        cap: int = 1000,
        now: float | None = None,
    ) -> int:
        where, params = _pending_filter(roles, exclude_requester, now)

        def tx(c: sqlite3.Connection) -> int:
            sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM approvals WHERE status = 'pending'{where} LIMIT ?)"
            return int(c.execute(sql, [*params, cap]).fetchone()[0])

        return await self.db.run(tx, write=False)

    async def list_due_soon(
        self,
        *,
        now: float,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
    ) -> list[Approval]:
        where, params = _pending_filter(roles, exclude_requester, now)
        # Named, the expression index is used or the query fails: never a silent walk of every pending row.
        sql = (
            f"SELECT doc FROM approvals INDEXED BY approvals_soon WHERE status = 'pending' AND {DUE_SOON_AT} < ?"
            f"{where} ORDER BY {DUE_SOON_AT}, id LIMIT ?"
        )

        def tx(c: sqlite3.Connection) -> list[Approval]:
            rows = c.execute(sql, [now, *params, limit]).fetchall()
            return [Approval.model_validate_json(r[0]) for r in rows]

        return await self.db.run(tx, write=False)

    async def list_recent(self, *, status: Status | None = None, limit: int = 50, cursor: str | None = None) -> Page:
        before = decode_cursor(cursor)

        def tx(c: sqlite3.Connection) -> Page:
            sql = "SELECT doc, created_at, id FROM approvals WHERE 1 = 1"
            params: list[Any] = []
            if status is not None:
                sql += " AND status = ?"
                params.append(str(status))
            if before:
                sql += " AND (created_at, id) < (?, ?)"
                params += list(before)
            return _page(c, sql + " ORDER BY created_at DESC, id DESC", params, limit)

        return await self.db.run(tx, write=False)

    async def list_matching(self, where: ApprovalFilter, *, limit: int = 50, cursor: str | None = None) -> Page:
        # Every filter in the query: SQLite reads the indexes of schema 21 (tool, tier, requester, who decided what)
        # and the status index, so a page holds `limit` rows whenever that many match.
        sql, params = matching_query(where, decode_cursor(cursor), limit, _MATCHING)
        return await self.db.run(lambda c: page_of(c.execute(sql, params).fetchall(), limit), write=False)

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        def tx(c: sqlite3.Connection) -> Approval | DecisionRefused | StaleVersion:
            writes = decision_writes(load_approval(c, cmd.approval_id), cmd, now, wall=time.time())
            if writes.approval is not None:
                write_approval(c, writes.approval)
            if writes.reviewer is not None:
                insert_reviewers(c, [writes.reviewer])
            insert_audit(c, writes.audit)
            for kind, payload in writes.jobs:
                insert_job(c, kind, payload, now)
            if writes.trust is not None:
                insert_grant(c, writes.trust)
            return writes.outcome  # a refusal is committed with its audit line, then raised

        out = await self.db.run(tx)
        if isinstance(out, DecisionRefused | StaleVersion):
            raise out
        self.db.changed(out.id)
        return out

    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        # SQLite has no notifications: a change made in this process wakes the waiter at once, one made by another
        # process within a poll of the file's data_version (one poll for all waiters, see SqliteConnection).
        return await wait_for_version(
            approval_id,
            signal=self.db.change_signal,
            read=self.get,
            after_version=after_version,
            timeout=timeout,
        )

    async def wait_created(self, *, timeout: float) -> list[str]:
        # SQLite has no notifications: a cheap check of the newest row every CREATED_POLL seconds (an index's end).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._seen is None:
            row = await self.db.run(lambda c: c.execute("SELECT max(rowid) FROM approvals").fetchone(), write=False)
            self._seen = int(row[0] or 0)
            return []
        seen = self._seen
        while True:
            rows = await self.db.run(
                lambda c: c.execute(
                    "SELECT rowid, id FROM approvals WHERE rowid > ? ORDER BY rowid LIMIT 200", (seen,)
                ).fetchall(),
                write=False,
            )
            if rows:
                self._seen = int(rows[-1][0])
                return [str(r[1]) for r in rows]
            left = deadline - loop.time()
            if left <= 0:
                return []
            await asyncio.sleep(min(CREATED_POLL, left))

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        def tx(c: sqlite3.Connection) -> list[Approval]:
            # Named: left to itself the planner reads every pending row through the status index and sorts them by
            # deadline, on every expiry tick; the deadline index gives the due ones, in order, at their own cost.
            rows = c.execute(
                "SELECT doc FROM approvals INDEXED BY approvals_due WHERE status = 'pending' AND expires_at <= ? "
                "ORDER BY expires_at LIMIT ?",
                (now, limit),
            ).fetchall()
            out = []
            for (doc,) in rows:
                expired = apply_expiry(Approval.model_validate_json(doc), now)
                if expired is not None:
                    write_approval(c, expired)
                    insert_audit(c, audit_for_decision(expired, actor="system", event="expired", now=now))
                    out.append(expired)
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
        def tx(c: sqlite3.Connection) -> Approval:
            current = load_approval(c, approval_id)
            updated = claim_rules.transitioned(
                current,
                target=target,
                expected_version=expected_version,
                now=now,
                reason=reason,
                superseded_by=superseded_by,
            )
            write_approval(c, updated)
            insert_audit(c, audit_for_decision(updated, actor=actor, event=str(target), now=now, detail=reason or ""))
            return updated

        updated = await self.db.run(tx)
        self.db.changed(updated.id)
        return updated


def _pending_filter(
    roles: Collection[str] | None, exclude_requester: str | None, now: float | None
) -> tuple[str, list[Any]]:
    """The ``AND`` clauses (and their parameters) of the pending approvals a reviewer may decide (with ``now``:
    those handed on to one of their roles by then too)."""
    sql, params = "", list[Any]()
    if roles is not None:
        marks = ",".join("?" * len(roles))
        handed = f" OR (backup_role IN ({marks}) AND hand_on_at <= ?)" if now is not None else ""
        sql += f" AND (required_role IS NULL OR required_role IN ({marks}){handed})"
        params += list(roles)
        if now is not None:
            params += [*roles, now]
    if exclude_requester:
        sql += " AND requester != ?"
        params.append(exclude_requester)
    return sql, params


def _page(c: sqlite3.Connection, sql: str, params: list[Any], limit: int, *, ranked: bool = False) -> Page:
    """``limit`` approvals of an ordered ``SELECT doc, <key>, id``, and the cursor after the last one."""
    rows = c.execute(f"{sql} LIMIT ?", [*params, limit + 1]).fetchall()
    return page_of(rows, limit, ranked=ranked)
