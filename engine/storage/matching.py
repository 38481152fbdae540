"""The filtered listing's query in the SQL stores (:meth:`~hitl.engine.ports.ApprovalStore.list_matching`), one
builder for SQLite's and PostgreSQL's dialects: every filter is in the ``WHERE``, so the database answers it from
its indexes (tool, tier, requester, decided, by creation time; a reviewer's from the table of who decided what) and
a page holds ``limit`` rows whenever that many match.

The reviewer filter reads ``approval_reviewers`` first (its key is the reviewer, then the creation time), so the
page comes in that table's order and its cursor continues it; every other page walks the approvals newest first.
On SQLite every decided approval, with no column filter to lead, is read as one range of the status index per decided
status, the ranges merged newest first (:attr:`MatchingDialect.merges_decided`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import Page
from hitl.engine.storage.codec import encode_cursor, encode_rank_cursor

__all__ = ["MatchingDialect", "matching_query", "page_of"]


@dataclass(frozen=True)
class MatchingDialect:
    """What differs between the SQL stores: parameter marks (the filters name the same indexed columns on both)."""

    mark: Callable[[int], str]
    """The mark of the n-th parameter (1-based): ``?`` or ``$n``."""
    merges_decided: bool = False
    """Every decided approval (no column filter given) read as a ``UNION ALL`` of one ``status = ...`` range of the
    status index ``(status, created_at, id)`` per decided status, newest first: SQLite merges the ordered ranges and
    stops at the page's end, so no index of its own (which every decide wrote) is needed for them."""


_DECIDED = tuple(str(s) for s in Status if s is not Status.PENDING)
"""The statuses of a decided approval (enum values, never a caller's text: written into the SQL as literals)."""


def matching_query(
    where: ApprovalFilter, before: tuple[float, str] | None, limit: int, dialect: MatchingDialect
) -> tuple[str, list[Any]]:
    """``SELECT doc, created_at, id`` of the approvals ``where`` keeps, newest first, after the cursor ``before``,
    ``limit`` rows; and its parameters."""
    params: list[Any] = []

    def bind(value: Any) -> str:
        params.append(value)
        return dialect.mark(len(params))

    if where.reviewer is not None:
        # The index of who decided what leads: its order is the page's, and each of its rows is one to show.
        sql = (
            "SELECT a.doc, r.created_at, r.approval_id FROM approval_reviewers AS r "
            f"JOIN approvals AS a ON a.id = r.approval_id WHERE r.reviewer = {bind(where.reviewer)}"
        )
        key = "r.created_at", "r.approval_id"
    else:
        sql, key = "SELECT a.doc, a.created_at, a.id FROM approvals AS a WHERE 1 = 1", ("a.created_at", "a.id")
    tier = str(where.tier) if where.tier is not None else None
    named = False
    for column, value in (("a.tool", where.tool), ("a.tier", tier), ("a.requester", where.requester)):
        if value is not None:  # each an indexed column of the row (schema 21, migration 17)
            sql += f" AND {column} = {bind(value)}"
            named = True
    # The limit as a literal (an int, never a caller's text): with a LIMIT parameter PostgreSQL planned the prepared
    # statement without knowing how small the page is, and a reviewer's page took 15-30 ms among 100,000 decided
    # approvals (the bench), against 1-4 ms with the literal.
    limited = f" LIMIT {int(limit) + 1}"
    if where.status == "decided" and dialect.merges_decided and where.reviewer is None and not named:
        # One arm per decided status, each a range of the status index in the page's order; the compound's ORDER BY
        # and LIMIT make SQLite merge them, reading each only as far as the page goes.
        arms = [f"{sql} AND a.status = '{status}'{_bounds(where, before, key, bind)}" for status in _DECIDED]
        return " UNION ALL ".join(arms) + f" ORDER BY created_at DESC, id DESC{limited}", params
    if where.status == "decided":
        sql += f" AND a.status != '{Status.PENDING}'"
    elif where.status is not None:
        sql += f" AND a.status = {bind(str(where.status))}"
    return f"{sql}{_bounds(where, before, key, bind)} ORDER BY {key[0]} DESC, {key[1]} DESC{limited}", params


def _bounds(
    where: ApprovalFilter, before: tuple[float, str] | None, key: tuple[str, str], bind: Callable[[Any], str]
) -> str:
    """The ``AND`` clauses of the creation dates and the cursor, on the page's key."""
    sql = ""
    if where.created_from is not None:
        sql += f" AND {key[0]} >= {bind(where.created_from)}"
    if where.created_before is not None:
        sql += f" AND {key[0]} < {bind(where.created_before)}"
    if before is not None:
        sql += f" AND ({key[0]}, {key[1]}) < ({bind(before[0])}, {bind(before[1])})"
    return sql


def page_of(rows: Sequence[Any], limit: int, *, ranked: bool = False) -> Page:
    """The page of ordered ``SELECT doc, <key>, id`` rows, a :func:`matching_query`'s or a pending listing's
    (``limit + 1`` at most: one more means a next page); ``ranked``: the key is the queue's rank, not the creation
    time, and so is the cursor's."""
    items = [Approval.model_validate_json(r[0]) for r in rows[:limit]]
    if len(rows) <= limit:
        return Page(items=items, cursor=None)
    last = rows[limit - 1]
    if ranked:
        return Page(items=items, cursor=encode_rank_cursor(int(last[1]), str(last[2])))
    return Page(items=items, cursor=encode_cursor(float(last[1]), str(last[2])))
