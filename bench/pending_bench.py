"""Pending-index benchmark (Redis): the next page, and a PING sent while it runs, after N decisions with no page read
in between, beside the same on an empty store, in one run with interleaved rounds.

Before decisions left the pending index in their own script, the first page after 100,000 decisions dropped them
all inside one Lua script (495 ms; a PING sent meanwhile waited 488 ms). Target: the page and the PING as fast as on
an empty store (within 2 ms). Run with `make bench` or `.venv/bin/python bench/pending_bench.py [--decisions N]`.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, redis_server, row, spread  # noqa: E402
from report import run_reported  # noqa: E402

from hitl.engine.domain.decide import DecideCommand  # noqa: E402
from hitl.engine.domain.models import DecisionKind, Reviewer  # noqa: E402
from hitl.engine.storage.redis import RedisStore, connect  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402

SUPPORT = Reviewer(id="U_SUPPORT1", roles=frozenset({"support"}))


async def filled(url: str, decisions: int, pending: int) -> RedisStore:
    """A store with ``decisions`` decided approvals (never paged since) and ``pending`` open ones."""
    store = RedisStore(connect(url), prefix=f"pb{uuid.uuid4().hex[:8]}")
    clock = FakeClock()
    made = [make_approval(now=clock.advance(0.001), key=f"a{i}") for i in range(decisions + pending)]
    for start in range(0, len(made), 1000):
        await asyncio.gather(*(store.approvals.create(a) for a in made[start : start + 1000]))
    for start in range(0, decisions, 1000):
        part = made[start : min(start + 1000, decisions)]
        await asyncio.gather(
            *(
                store.approvals.decide(
                    DecideCommand(
                        approval_id=a.id,
                        reviewer=SUPPORT,
                        kind=DecisionKind.APPROVE,
                        expected_version=1,
                        expected_hash=a.action_hash,
                    ),
                    now=clock.now(),
                )
                for a in part
            )
        )
    return store


async def one_page(store: RedisStore, url: str) -> tuple[float, float]:
    """Milliseconds for one page of pending approvals, and for a PING sent on another connection while it runs."""
    ping = connect(url)
    try:
        await ping.ping()  # connected before the clock starts
        t0 = time.perf_counter()
        page = asyncio.create_task(store.approvals.list_pending(limit=50))
        await asyncio.sleep(0)  # the page's script is on its way
        p0 = time.perf_counter()
        await ping.ping()
        pinged = time.perf_counter() - p0
        await page
        return (time.perf_counter() - t0) * 1000, pinged * 1000
    finally:
        await ping.aclose()


async def main(decisions: int, rounds: int) -> None:
    with redis_server() as url:
        empty = await filled(url, 0, 10)
        loaded = await filled(url, decisions, 10)
        results: dict[str, list[tuple[float, float]]] = {"empty": [], "loaded": []}
        for _ in range(rounds):  # interleaved, so both meet the same machine
            results["empty"].append(await one_page(empty, url))
            results["loaded"].append(await one_page(loaded, url))
        await empty.close()
        await loaded.close()
    heading(
        f"pending index after {decisions:,} decisions with no page read (Redis, {rounds} rounds, min / median / max)"
    )
    for name, label in (("empty", "empty store"), ("loaded", f"after {decisions:,} decisions")):
        pages = [p for p, _ in results[name]]
        pings = [q for _, q in results[name]]
        row(f"page of 50, {label} (ms)", spread(pages, "{:.2f}"))
        row(f"PING during it, {label} (ms)", spread(pings, "{:.2f}"))
    worse = max(r[0] for r in results["loaded"]) - max(r[0] for r in results["empty"])
    row("slowest page, loaded minus empty (ms)", f"{worse:.2f}", "<= 2 ms", worse <= 2.0)


if __name__ == "__main__":
    run_reported("pending", "Pending lists and decisions at scale", __doc__, main, decisions=100_000, rounds=20)
