"""Web inbox benchmark: the reads of one filtered inbox page with 1,000 pending approvals beside as many decided (so
a history page has rows to show: with none decided it would be empty, and cost nothing to compare with), and with the
same 1,000 among 100,000 decided, on SQLite, Redis and PostgreSQL, in one run with interleaved rounds.

A page of `GET /inbox` reads the queue's first page (the Home tab's ranked order) and one page of the history
(newest first, or of one status), then narrows each by the filters in memory (:class:`hitl.web.inbox.InboxQuery`);
a search by id reads one approval. So its cost follows the page, not the store: the store indexes it already reads
by (pending rank, status and creation time, creation time) serve it, and the inbox added none. Target: each filtered
page with 100,000 decided within 2x of the same page with none. Run with `make bench` or
`.venv/bin/python bench/inbox_bench.py [--decided N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import heading, row, spread  # noqa: E402
from every_store import every_store  # noqa: E402
from report import report  # noqa: E402

from hitl.engine.domain.decide import DecideCommand  # noqa: E402
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status, Tier  # noqa: E402
from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.storage.postgres import PostgresStore  # noqa: E402
from hitl.engine.storage.queue import queue_page  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402
from hitl.web.inbox import InboxQuery  # noqa: E402

SUPPORT = Reviewer(id="U_SUPPORT1", roles=frozenset({"support", "finance"}))
BATCH = 500


async def fill(store: Store, pending: int, decided: int) -> tuple[str, float]:
    """``decided`` approvals decided (a tenth rejected) then ``pending`` open ones of mixed tiers; a pending id, and
    the clock's time after."""
    clock = FakeClock()
    made: list[Approval] = [
        make_approval(
            now=clock.advance(0.001),
            key=f"i{i}",
            tool="refund" if i % 4 else "delete_customer",
            tier=Tier.ESCALATE if i % 17 == 0 else Tier.APPROVE,
            role="finance" if i % 10 == 0 else "support",
        )
        for i in range(decided + pending)
    ]
    for start in range(0, len(made), BATCH):
        await asyncio.gather(*(store.approvals.create(a) for a in made[start : start + BATCH]))
    for start in range(0, decided, BATCH):
        part = made[start : min(start + BATCH, decided)]
        await asyncio.gather(
            *(
                store.approvals.decide(
                    DecideCommand(
                        approval_id=a.id,
                        reviewer=SUPPORT,
                        kind=DecisionKind.REJECT if i % 10 == 0 else DecisionKind.APPROVE,
                        expected_version=1,
                        expected_hash=a.action_hash,
                        reason="bench",
                    ),
                    now=clock.now(),
                )
                for i, a in enumerate(part, start)
            )
        )
    if isinstance(store, PostgresStore):  # what autovacuum does to a table this size: the planner's statistics
        await store.db.run(lambda c: c.execute("ANALYZE approvals"))
    return made[-1].id, clock.now()


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await call()
    return (time.perf_counter() - t0) * 1000


def pages(store: Store, one: str, now: float) -> dict[str, Callable[[], Awaitable[object]]]:
    """The reads of each inbox page measured, filters applied as the inbox applies them."""
    a = store.approvals
    by_tool = InboxQuery(tool="refund", tier=Tier.APPROVE)
    by_reviewer = InboxQuery(reviewer="U_SUPPORT1", status="decided")

    async def waiting() -> object:
        return [x for x in (await queue_page(a, now=now, limit=50)).items if by_tool.keeps(x)]

    async def history() -> object:
        return [x for x in (await a.list_recent(limit=50)).items if by_reviewer.keeps(x)]

    async def rejected() -> object:
        return (await a.list_recent(status=Status.REJECTED, limit=50)).items

    return {
        "waiting, by tool and tier": waiting,
        "history, by reviewer": history,
        "history, status rejected": rejected,
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
    with report("inbox", "The web inbox's pages at size"):
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--pending", type=int, default=1_000)
        parser.add_argument("--decided", type=int, default=100_000)
        parser.add_argument("--rounds", type=int, default=15)
        ns = parser.parse_args()
        asyncio.run(main(ns.pending, ns.decided, ns.rounds))
