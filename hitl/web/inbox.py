"""The web inbox's list (``GET /inbox``): what waits on the signed-in reviewer in the Home tab's ranked order, each
with why it ranks there, and the decided history newest first; filtered by tool, tier, requester, reviewer, status
and date, searched by id, paged by the store's cursor.

It reads as the API's ``read`` scope reads for a read-and-decide token of the reviewer's id: the same store pages,
the same :func:`~hitl.api.context.may_see`, so the inbox shows nothing that token would not (and a practice twin
exactly as the API shows it: like any other). The store answers the history's filters from its indexes
(:meth:`~hitl.engine.ports.ApprovalStore.list_matching`); the queue keeps the Home tab's order and its filters are
checked on each row. Either way, when rows are left out (filters on the queue, what ``caller`` may not read or
decide) the inbox reads on, page after page, until ``limit`` rows are shown or
:data:`~hitl.engine.domain.approval_filter.MOST_EXAMINED` were read: a page is full whenever that many match
within the bound, and its cursor continues where the reading stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hitl.api.context import ApiContext, may_see
from hitl.api.problems import ApiError
from hitl.api.tokens import Caller
from hitl.engine.domain.approval_filter import MOST_EXAMINED, ApprovalFilter
from hitl.engine.domain.models import Approval, Reviewer, Status, Tier
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.ranking import why_ranked
from hitl.engine.domain.records import Page
from hitl.engine.errors import ErrorCode, NotFound
from hitl.engine.storage.queue import queue_page

__all__ = ["InboxQuery", "InboxRow", "InboxView", "inbox_query", "inbox_view", "slack_permalink"]

_Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class InboxQuery(BaseModel):
    """What the inbox shows (``GET /inbox``'s query): every field optional, unknown ones refused."""

    model_config = ConfigDict(extra="forbid")

    tool: _Name | None = None
    tier: Tier | None = None
    requester: _Name | None = None
    reviewer: _Name | None = None
    """Only approvals this reviewer decided on (any vote)."""
    status: Status | Literal["any", "decided"] = "any"
    """``any`` (the default: waiting on you, then the history), ``pending``, ``decided`` or one status."""
    since: date | None = None
    """Created on this day (UTC) or later."""
    until: date | None = None
    """Created on this day (UTC) or earlier."""
    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_\-]+$")] | None = None
    """Search by id: that one approval, if the reviewer may read it."""
    cursor: Annotated[str, Field(max_length=400)] | None = None
    """The next page (the store's cursor): of the queue with ``status=pending``, else of the history."""
    limit: int = Field(default=50, ge=1, le=200)

    def where(self, *, pending: bool) -> ApprovalFilter:
        """The store's filter of the queue (``pending``) or of the history: ``any`` and ``decided`` read every
        decided approval, one status only that one; days are UTC, ``until`` included."""
        status: Status | Literal["decided"] = Status.PENDING
        if not pending:
            status = "decided" if self.status in ("any", "decided", Status.PENDING) else Status(self.status)
        return ApprovalFilter(
            tool=self.tool,
            tier=self.tier,
            requester=self.requester,
            reviewer=self.reviewer,
            status=status,
            created_from=None if self.since is None else _midnight(self.since),
            created_before=None if self.until in (None, date.max) else _midnight(self.until + timedelta(days=1)),
        )

    def keeps(self, a: Approval) -> bool:
        """Whether ``a`` passes the filters (the status one aside: it chooses whether the queue or the history is
        read)."""
        return self.where(pending=a.status is Status.PENDING).keeps(a)


def _midnight(day: date) -> float:
    """The start of ``day`` (UTC) in epoch seconds."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def inbox_query(raw: dict[str, str]) -> InboxQuery:
    """The query, or a 400 that names the field to fix (never a traceback)."""
    try:
        return InboxQuery.model_validate({k: v for k, v in raw.items() if v != ""})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "query"
        raise ApiError(
            400, str(ErrorCode.INVALID_INPUT), f"{where}: {first['msg']}; fix the filter and load the page again"
        ) from None


@dataclass(frozen=True)
class InboxRow:
    """One approval as a row of the inbox."""

    approval: Approval
    view: Presentation
    why: str | None
    """Why it ranks where it does (pending rows only)."""
    permalink: str | None
    """Its Slack message (None: no card was posted)."""
    group: bool
    """Whether its Slack card is a group card (several approvals on one message)."""


@dataclass(frozen=True)
class InboxView:
    """What the inbox page draws."""

    waiting: list[InboxRow]
    history: list[InboxRow]
    cursor: str | None
    """The next page, if any (:attr:`InboxQuery.cursor`)."""
    searched: bool = False


def slack_permalink(channel: str, ts: str) -> str:
    """A Slack message's address built from the channel and ``ts`` the store keeps, in Slack's permalink format
    (``/archives/<channel>/p<ts without its dot>``), on slack.com, which sends a signed-in browser on to its
    workspace: no ``chat.getPermalink`` call for each row drawn."""
    return f"https://slack.com/archives/{channel}/p{ts.replace('.', '')}"


async def _row(ctx: ApiContext, a: Approval, *, now: float, ranked: bool) -> InboxRow:
    messages = ctx.lifecycle.store.messages
    ref = await messages.get(a.id)
    group = ref is not None and len(await messages.shown_on(ref)) > 1
    link = slack_permalink(ref.channel, ref.ts) if ref is not None else None
    return InboxRow(a, ctx.present(a), why_ranked(a, now=now) if ranked else None, link, group)


async def inbox_view(ctx: ApiContext, caller: Caller, q: InboxQuery, *, now: float) -> InboxView:
    """The rows ``caller`` may read that ``q`` keeps: pending ones ``caller`` may decide in the queue's order, then
    the history; the cursor pages the queue when ``q`` asks for pending ones alone, else the history."""
    store = ctx.lifecycle.store.approvals
    if q.id is not None:
        try:
            found = await ctx.visible(caller, q.id)  # 404 alike for one not there and one not theirs
        except (ApiError, NotFound):
            return InboxView([], [], None, searched=True)
        pending = found.status is Status.PENDING
        row = await _row(ctx, found, now=now, ranked=pending)
        return InboxView([row] if pending else [], [] if pending else [row], None, searched=True)
    waiting: list[InboxRow] = []
    cursor: str | None = None
    # With status pending the cursor pages the queue; otherwise the history (the queue's first page above it).
    if q.status == Status.PENDING or (q.status == "any" and q.cursor is None):
        queued = q.where(pending=True)
        memo: dict[str | None, Reviewer] = {}

        async def read_queue(limit: int, after: str | None) -> Page:
            return await queue_page(store, now=now, limit=limit, cursor=after)

        async def shows_pending(a: Approval) -> bool:
            return may_see(caller, a, now=now) and queued.keeps(a) and await ctx.can_decide(caller, a, memo)

        start = q.cursor if q.status == Status.PENDING else None
        shown, after = await _read_on(read_queue, shows_pending, limit=q.limit, cursor=start)
        waiting = [await _row(ctx, a, now=now, ranked=True) for a in shown]
        cursor = after if q.status == Status.PENDING else None
    history: list[InboxRow] = []
    if q.status != Status.PENDING:
        where = q.where(pending=False)

        async def read_history(limit: int, after: str | None) -> Page:
            return await store.list_matching(where, limit=limit, cursor=after)

        async def shows_decided(a: Approval) -> bool:
            return a.status is not Status.PENDING and may_see(caller, a, now=now)

        shown, cursor = await _read_on(read_history, shows_decided, limit=q.limit, cursor=q.cursor)
        history = [await _row(ctx, a, now=now, ranked=False) for a in shown]
    return InboxView(waiting, history, cursor)


async def _read_on(
    read: Callable[[int, str | None], Awaitable[Page]],
    shows: Callable[[Approval], Awaitable[bool]],
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[Approval], str | None]:
    """Up to ``limit`` approvals ``shows`` keeps, reading page after page from ``cursor`` (each page only as long as
    the rows still missing, so the last cursor continues right after the last row read) until the store has no more
    or :data:`~hitl.engine.domain.approval_filter.MOST_EXAMINED` were read; and the cursor where reading stopped."""
    shown: list[Approval] = []
    examined = 0
    while len(shown) < limit and examined < MOST_EXAMINED:
        page = await read(limit - len(shown), cursor)
        examined += max(len(page.items), 1)
        shown += [a for a in page.items if await shows(a)]
        cursor = page.cursor
        if cursor is None:
            break
    return shown, cursor
