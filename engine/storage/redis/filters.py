"""The filtered listing on Redis (:meth:`~hitl.engine.ports.ApprovalStore.list_matching`) and its indexes.

Indexes, each a sorted set scored by creation time: every approval of a tool, of a tier, of a requester (written
with the approval, index first as the other indexes are); every decided approval (``move.lua``'s ``unindex`` adds
it in the step that ends its pending state). Who recorded a decision or vote on what is one lexicographic set,
``<reviewer> TAB <creation time, fixed width> TAB <id>`` (``decide.lua`` adds the member in the decision's own
step), read by range for one reviewer.

A page reads the smallest index the filters name (the reviewer's, when one is named), newest first, and checks the
other filters on each approval it reads (a status filter on the status alone first: the document is most of a
read's cost), at most :data:`~hitl.engine.domain.approval_filter.MOST_EXAMINED` a call: past that bound it returns
the page it has with a cursor where it stopped. An entry whose approval is gone (purged by retention) is skipped and
removed from the index it was read from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from redis.asyncio.client import Pipeline

from hitl.engine.domain.approval_filter import MOST_EXAMINED, ApprovalFilter
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import Page
from hitl.engine.storage.codec import encode_cursor
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.connection import RedisConnection, key_part

__all__ = ["index_filters", "lex_time", "matching_page", "stored_entries", "voted_key"]

_MOST_BATCH = 1000
"""The most index entries read in one round trip (with their approvals)."""


def _next_batch(batch: int, *, read: int, kept: int, missing: int) -> int:
    """How many index entries to read next: the rows still missing at the share the last read kept (a quarter more),
    or, when it kept none, twice the last read. The first read is the page and one more (the smallest index often
    holds little else): a page costs about what it shows, not a fixed batch's worth, at any size of the index (a
    read that doubled blindly read three times the documents in a large index as in a small one)."""
    grown = batch * 2 if kept == 0 else -(-missing * read * 5 // (kept * 4)) + 1
    return max(1, min(grown, _MOST_BATCH))


Fetch = Callable[[list[str]], Awaitable[list[Approval | None]]]


def _by(conn: RedisConnection, what: str, value: str) -> str:
    return f"{conn.p}:by-{what}:{key_part(value)}"


def voted_key(conn: RedisConnection) -> str:
    """Who recorded a decision or vote on what (``decide.lua`` names it from the approval's key: keep them alike)."""
    return f"{conn.p}:voted"


def decided_key(conn: RedisConnection) -> str:
    """Every approval no longer pending, by creation time (``move.lua`` names it from the approval's key)."""
    return f"{conn.p}:decided"


def lex_time(created_at: float) -> str:
    """A creation time as ``decide.lua`` writes it in a member of :func:`voted_key` (``%020.6f``: sorts as text)."""
    return f"{created_at:020.6f}"


def index_filters(pipe: Pipeline, conn: RedisConnection, a: Approval) -> None:
    """Queue ``a``'s entries in the filter indexes on ``pipe`` (``NX``: an entry already there is kept): its tool,
    tier and requester; decided and who decided, when it is stored decided already (an upgrade, an import)."""
    at = a.created_at
    pipe.zadd(_by(conn, "tool", a.tool), {a.id: at}, nx=True)
    pipe.zadd(_by(conn, "tier", str(a.tier)), {a.id: at}, nx=True)
    pipe.zadd(_by(conn, "requester", a.requester), {a.id: at}, nx=True)
    if a.status is not Status.PENDING:
        pipe.zadd(decided_key(conn), {a.id: at}, nx=True)
    voted = {f"{d.reviewer}\t{lex_time(at)}\t{a.id}": 0 for d in a.decisions}
    if voted:
        pipe.zadd(voted_key(conn), voted, nx=True)


def stored_entries(conn: RedisConnection, doc: dict[str, Any], approval_id: str) -> tuple[list[str], list[str]]:
    """Where the stored approval ``doc`` stands in the filter indexes, for retention's removal (``purge.lua``): the
    sorted sets holding its id (tool, tier, requester, decided) and its members of :func:`voted_key` (one for each
    reviewer who recorded a decision or vote), as :func:`index_filters` and ``decide.lua`` wrote them."""
    keys = [
        _by(conn, "tool", str(doc.get("tool", ""))),
        _by(conn, "tier", str(doc.get("tier", ""))),
        _by(conn, "requester", str(doc.get("requester", ""))),
        decided_key(conn),
    ]
    at = lex_time(float(doc.get("created_at", 0.0)))
    reviewers = {str(d.get("reviewer", "")) for d in doc.get("decisions", ()) if isinstance(d, dict)}
    return keys, sorted(f"{r}\t{at}\t{approval_id}" for r in reviewers)


async def _scored_index(conn: RedisConnection, where: ApprovalFilter) -> str:
    """The smallest index by creation time that holds every approval ``where`` may keep (one round trip)."""
    named = [conn.all_key]
    if where.tool is not None:
        named.append(_by(conn, "tool", where.tool))
    if where.tier is not None:
        named.append(_by(conn, "tier", str(where.tier)))
    if where.requester is not None:
        named.append(_by(conn, "requester", where.requester))
    if where.status is not None and where.status != Status.PENDING:
        named.append(decided_key(conn))
    if len(named) == 1:
        return named[0]
    async with conn.r.pipeline(transaction=False) as pipe:
        for key in named:
            pipe.zcard(key)
        sizes = await pipe.execute()
    return min(zip(sizes, named, strict=True))[1]


async def matching_page(
    conn: RedisConnection, fetch: Fetch, where: ApprovalFilter, *, limit: int, cursor: tuple[float, str] | None
) -> Page:
    """The page of approvals ``where`` keeps after ``cursor``, newest first (the module's docstring says how)."""
    if where.reviewer is not None:
        key, read = voted_key(conn), _voted_reader(conn, where, cursor)
    else:
        key = await _scored_index(conn, where)
        read = _scored_reader(conn, key, where, cursor)
    kept: list[tuple[Approval, tuple[float, str]]] = []
    examined, offset, batch = 0, 0, limit + 1
    last: tuple[float, str] | None = None
    while examined < MOST_EXAMINED:
        consumed, entries = await read(offset, min(batch, MOST_EXAMINED - examined))
        before = len(kept)
        if consumed == 0:
            return Page(items=[a for a, _ in kept], cursor=None)
        found = await _fetch_status_first(conn, fetch, where, [aid for _, aid, _ in entries])
        gone = await _purged(
            conn, [(aid, member) for (_, aid, member), a in zip(entries, found, strict=True) if a is None]
        )
        if gone:
            await conn.r.zrem(key, *gone)  # repaired on read
        offset += consumed - len(gone)
        for (at, aid, _), a in zip(entries, found, strict=True):
            examined += 1
            last = (a.created_at if isinstance(a, Approval) else at, aid)
            if not isinstance(a, Approval) or not where.keeps(a):
                continue
            kept.append((a, last))
            if len(kept) > limit:  # one more than the page: there is a next one, after the page's last row
                return Page(items=[x for x, _ in kept[:limit]], cursor=encode_cursor(*kept[limit - 1][1]))
        batch = _next_batch(batch, read=consumed, kept=len(kept) - before, missing=limit + 1 - len(kept))
    # The bound reached: the rows found so far, and a cursor where the reading stopped.
    return Page(items=[x for x, _ in kept], cursor=encode_cursor(*last) if last is not None else None)


async def _fetch_status_first(
    conn: RedisConnection, fetch: Fetch, where: ApprovalFilter, ids: list[str]
) -> list[Approval | None | bool]:
    """``fetch(ids)``; with a status filter, each approval's status read first (one round trip of small replies)
    and only those it keeps read whole: False for one left out by its status, None for one that is gone. An
    approval's document is most of what a page costs to read, and a status filter leaves out most of an index."""
    if where.status is None:
        return list(await fetch(ids))
    async with conn.r.pipeline(transaction=False) as pipe:
        for approval_id in ids:
            pipe.hget(conn.approval_key(approval_id), "status")
        statuses = [None if s is None else text(s) for s in await pipe.execute()]

    def passes(status: str) -> bool:
        return status != Status.PENDING if where.status == "decided" else status == where.status

    wanted = [aid for aid, status in zip(ids, statuses, strict=True) if status is not None and passes(status)]
    read = dict(zip(wanted, await fetch(wanted), strict=True)) if wanted else {}
    return [None if status is None else read.get(aid, False) for aid, status in zip(ids, statuses, strict=True)]


async def _purged(conn: RedisConnection, missing: list[tuple[str, str]]) -> list[str]:
    """The index members, of ``(id, member)`` whose approval could not be read, whose approval was purged: gone from
    the index of every approval too. (One being created is there already: ``create`` writes that index before these,
    in the same pipeline, and its document after them; it is skipped for now, and kept.)"""
    if not missing:
        return []
    async with conn.r.pipeline(transaction=False) as pipe:
        for aid, _ in missing:
            pipe.zscore(conn.all_key, aid)
        scores = await pipe.execute()
    return [member for (_, member), score in zip(missing, scores, strict=True) if score is None]


Entries = list[tuple[float, str, str]]
"""Index entries read: each ``(creation time, id, member)``."""
Reader = Callable[[int, int], Awaitable[tuple[int, Entries]]]
"""Reads ``count`` index entries from ``offset`` on: how many it read, and those after the cursor."""


def _scored_reader(conn: RedisConnection, key: str, where: ApprovalFilter, cursor: tuple[float, str] | None) -> Reader:
    hi = "+inf" if where.created_before is None else f"({where.created_before!r}"
    if cursor is not None and (where.created_before is None or cursor[0] < where.created_before):
        hi = repr(cursor[0])  # inclusive: ties on the cursor's time are told apart by id below
    lo = "-inf" if where.created_from is None else repr(where.created_from)

    async def read(offset: int, count: int) -> tuple[int, Entries]:
        got = cast(
            list[tuple[Any, float]],
            await conn.r.zrevrangebyscore(key, hi, lo, start=offset, num=count, withscores=True),
        )
        rows = [(float(sc), text(m), text(m)) for m, sc in got]
        return len(got), [r for r in rows if cursor is None or (r[0], r[1]) < cursor]

    return read


def _voted_reader(conn: RedisConnection, where: ApprovalFilter, cursor: tuple[float, str] | None) -> Reader:
    assert where.reviewer is not None
    head = f"{where.reviewer}\t"
    hi = f"[{head}:"  # above every member of this reviewer: a time starts with a digit, ':' sorts after them
    if where.created_before is not None:
        hi = f"({head}{lex_time(where.created_before)}"
    if cursor is not None:
        hi = min(hi, f"({head}{lex_time(cursor[0])}\t{cursor[1]}", key=lambda bound: bound[1:])
    lo = f"[{head}" if where.created_from is None else f"[{head}{lex_time(where.created_from)}"
    key = voted_key(conn)

    async def read(offset: int, count: int) -> tuple[int, Entries]:
        got = [text(m) for m in await conn.r.zrevrangebylex(key, hi, lo, start=offset, num=count)]
        rows = []
        for member in got:
            _, at, aid = member.rsplit("\t", 2)
            rows.append((float(at), aid, member))
        return len(got), rows

    return read
