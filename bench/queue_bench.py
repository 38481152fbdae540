"""Ranked-queue benchmark: a reviewer's first page of pending approvals, the most important first, and how many wait
on them, with 1,000 and with 20,000 pending, on SQLite, Redis and PostgreSQL, in one run with interleaved rounds.

The peer is the page in age order (the order before ranking); the floor is reading one approval. Target: the ranked
page with 20,000 pending within 2x of the same page with 1,000 (its cost follows the page, not the queue), and
counting bounded by its cap (1,000). Run with `make bench` or `.venv/bin/python bench/queue_bench.py [--big N]`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import heading, row, spread  # noqa: E402
from every_store import every_store  # noqa: E402
from report import run_reported  # noqa: E402

from hitl.engine.domain.models import Tier  # noqa: E402
from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.storage.postgres import PostgresStore  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402

ROLES = ["support"]


async def fill(store: Store, n: int) -> str:
    """``n`` pending approvals of mixed tiers, ratios and deadlines, a tenth of them another role's; one's id."""
    clock = FakeClock()
    made = []
    for i in range(n):
        a = make_approval(
            now=clock.advance(0.01),
            key=f"q{i}",
            role="finance" if i % 10 == 0 else "support",
            tier=Tier.ESCALATE if i % 17 == 0 else Tier.APPROVE,
            ttl=600.0 * (i % 24 + 1),
        ).model_copy(update={"ratio": None if i % 3 else (i % 50) / 7})
        made.append(a)
    for start in range(0, n, 500):
        await asyncio.gather(*(store.approvals.create(a) for a in made[start : start + 500]))
    if isinstance(store, PostgresStore):  # what autovacuum does to a table this size: the planner's statistics
        await store.db.run(lambda c: c.execute("ANALYZE approvals"))
    return made[n // 2].id


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await call()
    return (time.perf_counter() - t0) * 1000


async def main(small: int, big: int, rounds: int) -> None:
    with every_store("qb") as made:
        for name, new in made.items():
            sizes: dict[int, tuple[Store, str]] = {}
            for n in (small, big):
                store = new()
                sizes[n] = (store, await fill(store, n))
            samples: dict[str, list[float]] = {}
            for _ in range(rounds):  # interleaved: every measure meets the same machine
                for n, (store, one) in sizes.items():
                    a = store.approvals
                    for label, call in (
                        (f"ranked page of 50, {n:,} pending", partial(a.list_pending, roles=ROLES, order="rank")),
                        (f"age page of 50 (peer), {n:,} pending", partial(a.list_pending, roles=ROLES)),
                        (f"count, {n:,} pending (cap 1,000)", partial(a.count_pending, roles=ROLES)),
                        (f"one approval read (floor), {n:,} pending", partial(a.get, one)),
                    ):
                        samples.setdefault(label, []).append(await timed(call))
            heading(f"a reviewer's queue on {name} ({rounds} rounds, min / median / max, ms)")
            for label, found in samples.items():
                row(label, spread(found, "{:.2f}"))
            grown = statistics.median(samples[f"ranked page of 50, {big:,} pending"]) / statistics.median(
                samples[f"ranked page of 50, {small:,} pending"]
            )
            row(f"ranked page, {big:,} over {small:,} pending (median)", f"{grown:.2f}x", "<= 2x", grown <= 2.0)
            for store, _ in sizes.values():
                await store.close()


if __name__ == "__main__":
    run_reported("queue", "The ranked queue at scale", __doc__, main, small=1_000, big=20_000, rounds=15)
