"""Web inbox benchmark: the reads of one filtered inbox page with 1,000 pending approvals beside as many decided (so
a history page has rows to show: with none decided it would be empty, and cost nothing to compare with), and with the
same 1,000 among 100,000 decided, on SQLite, Redis and PostgreSQL, in one run with interleaved rounds.

A page of `GET /inbox` reads the queue's first page (the Home tab's ranked order, the filters checked on each row,
reading on while rows are left out) and one page of the history, which the store answers with every filter
(:meth:`hitl.engine.ports.ApprovalStore.list_matching`, from its stored indexes: tool, tier, requester, decided,
who decided what); a search by id reads one approval. The pages measured make exactly those calls
(:meth:`hitl.web.inbox.InboxQuery.where`). Target: each filtered page with 100,000 decided within 2x of the same
page beside 1,000. The decided history is written in batches (SQL: one multi-row insert a batch, which the
stores' triggers index as any write; Redis: the store's own create and decide, 500 at a time, which keep its
indexes). Run with `make bench` or `.venv/bin/python bench/inbox_bench.py [--decided N]`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import heading, row, spread  # noqa: E402
from every_store import every_store  # noqa: E402
from report import run_reported  # noqa: E402

from hitl.engine.domain.approval_filter import MOST_EXAMINED, ApprovalFilter  # noqa: E402
from hitl.engine.domain.decide import DecideCommand, apply_decision  # noqa: E402
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status, Tier  # noqa: E402
from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.storage.codec import APPROVAL_COLUMNS, approval_doc, approval_row, reviewer_rows  # noqa: E402
from hitl.engine.storage.postgres import PostgresStore  # noqa: E402
from hitl.engine.storage.queue import queue_page  # noqa: E402
from hitl.engine.storage.sqlite import SqliteStore  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402
from hitl.web.inbox import InboxQuery  # noqa: E402

REVIEWERS = [Reviewer(id=f"U_SUPPORT{n}", roles=frozenset({"support", "finance"})) for n in range(10)]
"""Who decided the history, in turn: the reviewer filter keeps a tenth of it."""
BATCH = 500
DECIDED_EVERY = 20.0
"""Seconds between two decided approvals' creation: 100,000 span 23 days, so "last week" keeps a part of them."""


def _made(clock: FakeClock, i: int, *, step: float) -> Approval:
    return make_approval(
        now=clock.advance(step),
        key=f"i{i}",
        tool="refund" if i % 4 else "delete_customer",
        tier=Tier.ESCALATE if i % 17 == 0 else Tier.APPROVE,
        role="finance" if i % 10 == 0 else "support",
        requester="agent:riley" if i % 3 else "agent:sam",
    )


def _decided(a: Approval, i: int, now: float) -> Approval:
    """``a`` decided as the store's decide would leave it (a tenth rejected), by the reviewers in turn."""
    command = DecideCommand(
        approval_id=a.id,
        reviewer=REVIEWERS[i % len(REVIEWERS)],
        kind=DecisionKind.REJECT if i % 10 == 0 else DecisionKind.APPROVE,
        expected_version=1,
        expected_hash=a.action_hash,
        reason="bench",
    )
    return apply_decision(a, command, now)


async def _write_decided(store: Store, decided: list[Approval]) -> None:
    """The decided history, a batch at a time: one multi-row insert on SQL (with the rows of who decided what),
    the store's create and decide on Redis (its indexes are written by those steps)."""
    for start in range(0, len(decided), BATCH):
        part = decided[start : start + BATCH]
        if isinstance(store, SqliteStore | PostgresStore):
            await _insert(store, part)
        else:
            await asyncio.gather(*(store.approvals.create(a.model_copy(update=_OPEN)) for a in part))
            await asyncio.gather(
                *(
                    store.approvals.decide(
                        DecideCommand(
                            approval_id=a.id,
                            reviewer=REVIEWERS[i % len(REVIEWERS)],
                            kind=a.decisions[0].kind,
                            expected_version=1,
                            expected_hash=a.action_hash,
                            reason="bench",
                        ),
                        now=a.decisions[0].at,
                    )
                    for i, a in enumerate(part, start)
                )
            )


async def _insert(store: SqliteStore | PostgresStore, part: list[Approval]) -> None:
    """One multi-row insert of approval rows and one of their reviewers' rows, in one transaction."""
    rows = [approval_row(a, approval_doc(a)) for a in part]
    reviewers = [row for a in part for row in reviewer_rows(a)]
    reviewed = "INSERT INTO approval_reviewers (reviewer, created_at, approval_id) VALUES "
    if isinstance(store, SqliteStore):

        def write(c: sqlite3.Connection) -> None:
            c.executemany(f"INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES ({', '.join('?' * len(rows[0]))})", rows)
            c.executemany(f"{reviewed}(?, ?, ?)", reviewers)

        await store.db.run(write)
        return
    marks = ", ".join(f"${n}" for n in range(1, len(rows[0]) + 1))

    async def send(c: Any) -> None:
        await c.executemany(f"INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES ({marks})", rows)
        await c.executemany(f"{reviewed}($1, $2, $3)", reviewers)

    await store.db.run(send)


_OPEN = {"status": Status.PENDING, "version": 1, "decisions": [], "reason": None, "updated_at": 0.0}
"""What a decided approval was before its decision (Redis writes its history through the store's own steps)."""


async def fill(store: Store, pending: int, decided: int) -> tuple[str, float]:
    """``decided`` approvals decided (a tenth rejected, by ten reviewers in turn) then ``pending`` open ones of
    mixed tools, tiers and requesters; a pending id, and the clock's time after."""
    clock = FakeClock()
    history = [_made(clock, i, step=DECIDED_EVERY) for i in range(decided)]
    await _write_decided(store, [_decided(a, i, a.created_at + 1) for i, a in enumerate(history)])
    waiting = [_made(clock, i, step=0.001) for i in range(decided, decided + pending)]
    for start in range(0, len(waiting), BATCH):
        await asyncio.gather(*(store.approvals.create(a) for a in waiting[start : start + BATCH]))
    if isinstance(store, PostgresStore):
        # What autovacuum does after a bulk insert this size (the planner's statistics, the visibility map, hint
        # bits), done before the rounds rather than while they run (a read statement: VACUUM takes no transaction).
        await store.db.run(lambda c: c.execute("VACUUM (ANALYZE) approvals, approval_reviewers"), write=False)
    return waiting[-1].id, clock.now()


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await call()
    return (time.perf_counter() - t0) * 1000


async def waiting_page(store: Store, q: InboxQuery, now: float) -> list[Approval]:
    """The inbox's waiting rows: queue pages in the Home tab's order, the filters checked on each row, read on
    until the page is full or the bound was read (as :func:`hitl.web.inbox.inbox_view` does)."""
    where, shown, cursor, examined = q.where(pending=True), list[Approval](), None, 0
    while len(shown) < q.limit and examined < MOST_EXAMINED:
        page = await queue_page(store.approvals, now=now, limit=q.limit - len(shown), cursor=cursor)
        examined += max(len(page.items), 1)
        shown += [a for a in page.items if where.keeps(a)]
        cursor = page.cursor
        if cursor is None:
            break
    return shown


def pages(store: Store, one: str, now: float) -> dict[str, Callable[[], Awaitable[object]]]:
    """The reads of each inbox page measured, filters applied as the inbox applies them."""
    a = store.approvals
    week = now - 7 * 86_400

    def history(q: InboxQuery) -> Callable[[], Awaitable[object]]:
        return lambda: a.list_matching(q.where(pending=False), limit=q.limit)

    return {
        "waiting, by tool and tier": lambda: waiting_page(store, InboxQuery(tool="refund", tier=Tier.APPROVE), now),
        "history, every decided": history(InboxQuery()),
        "history, by reviewer": history(InboxQuery(reviewer="U_SUPPORT1", status="decided")),
        "history, by tool": history(InboxQuery(tool="delete_customer", status="decided")),
        "history, status rejected": history(InboxQuery(status="rejected")),
        "history, by requester and tool": history(InboxQuery(requester="agent:sam", tool="delete_customer")),
        "history, by reviewer, last week": lambda: a.list_matching(
            ApprovalFilter(reviewer="U_SUPPORT1", status="decided", created_from=week), limit=50
        ),
        "search by id": lambda: a.get(one),
    }


async def main(pending: int, decided: int, rounds: int) -> None:
    with every_store("ib") as made:
        for name, new in made.items():
            sizes: dict[str, tuple[Store, str, float]] = {}
            small = f"beside {pending:,} decided"
            for label, n in ((small, pending), (f"among {decided:,} decided", decided)):
                store = new()
                sizes[label] = (store, *await fill(store, pending, n))
            samples: dict[tuple[str, str], list[float]] = {}
            for _ in range(rounds):  # interleaved: every measure meets the same machine
                for size, (store, one, now) in sizes.items():
                    for page, call in pages(store, one, now).items():
                        samples.setdefault((page, size), []).append(await timed(call))
            heading(f"inbox pages on {name}, {pending:,} pending ({rounds} rounds, min / median / max, ms)")
            for (page, size), found in samples.items():
                row(f"{page}, {size}", spread(found, "{:.2f}"))
            big = f"among {decided:,} decided"
            for page in pages(*next(iter(sizes.values()))).keys():
                grown = statistics.median(samples[(page, big)]) / statistics.median(samples[(page, small)])
                row(f"{page}: {big} over {small} (median)", f"{grown:.2f}x", "<= 2x", grown <= 2.0)
            for store, _, _ in sizes.values():
                await store.close()


if __name__ == "__main__":
    run_reported("inbox", "The web inbox's pages at size", __doc__, main, pending=1_000, decided=100_000, rounds=15)
