"""Store benchmark: decide latency and throughput, list-pending at scale, memory per approval.

Run with `make bench` (or `.venv/bin/python bench/store_bench.py [--pending 100000]`). Prints each figure
beside its target. Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    BareCommits,
    CountingConnection,
    heading,
    median,
    pct,
    redis_server,
    row,
    support_approves,
    wake_after_decision_ms,
)
from report import bar, chart, report  # noqa: E402

from hitl.engine.domain.decide import DecideCommand  # noqa: E402
from hitl.engine.domain.models import Approval  # noqa: E402
from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.storage.redis import RedisStore, connect  # noqa: E402
from hitl.engine.storage.sqlite import SqliteStore  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402


def approvals(n: int, clock: FakeClock, tag: str) -> list[Approval]:
    return [
        make_approval(now=clock.advance(0.001), key=f"{tag}{i}", args={"order_id": str(i), "amount": 49})
        for i in range(n)
    ]


def cmd(a: Approval) -> DecideCommand:
    """:data:`~_common.SUPPORT`'s approval of ``a``, made through ``bench``."""
    return support_approves(a, via="bench")


async def create_all(store: Store, items: list[Approval], concurrency: int = 64) -> None:
    it = iter(items)

    async def worker() -> None:
        for a in it:
            await store.approvals.create(a)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def decide_bench(store: Store, clock: FakeClock, n_seq: int, n_conc: int) -> dict[str, float]:
    warm = approvals(200, clock, "warm")
    await create_all(store, warm)
    for a in warm:
        await store.approvals.decide(cmd(a), now=clock.now())
    seq = approvals(n_seq, clock, "seq")
    await create_all(store, seq)
    # Setup objects are long-lived: move them out of the collector's way, as a server does after start-up.
    gc.collect()
    gc.freeze()
    lat = []
    for a in seq:
        t0 = time.perf_counter()
        await store.approvals.decide(cmd(a), now=clock.now())
        lat.append((time.perf_counter() - t0) * 1000)
    conc = approvals(n_conc, clock, "conc")
    await create_all(store, conc)
    it = iter(conc)

    async def caller() -> None:
        for a in it:
            await store.approvals.decide(cmd(a), now=clock.now())

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(50)))
    rate = n_conc / (time.perf_counter() - t0)
    return {"median": median(lat), "p99": pct(lat, 0.99), "rate": rate}


async def wake_bench(store: Store, decider: Store, clock: FakeClock, n: int = 200) -> list[float]:
    """ms from a decision's return to the wake-up of a waiter on it (``decider``: the store that decides; another
    connection than the waiter's stands for another process)."""
    out = []
    for a in approvals(n, clock, f"wake{uuid.uuid4().hex[:4]}"):
        await store.approvals.create(a)
        out.append(await wake_after_decision_ms(store, decider, a, cmd(a), clock, settle=0.002))
    return out


def wake_row(label: str, samples: list[float], target_ms: float) -> None:
    p50 = median(samples)
    row(label, f"{p50:.2f} / {pct(samples, 0.99):.2f} ms", f"p50 <= {target_ms:g} ms", p50 <= target_ms)


async def list_bench(store: Store, clock: FakeClock, sizes: list[int]) -> dict[int, float]:
    out: dict[int, float] = {}
    have = 0
    for size in sizes:
        await create_all(store, approvals(size - have, clock, f"list{size}-"))
        have = size
        await store.approvals.list_pending(limit=50)
        times = []
        cursor = None
        for i in range(30):
            t0 = time.perf_counter()
            page = await store.approvals.list_pending(limit=50, roles=["support"], cursor=cursor if i % 2 else None)
            times.append((time.perf_counter() - t0) * 1000)
            cursor = page.cursor
        out[size] = median(times)
    return out


async def redis_part(url: str, args: argparse.Namespace) -> None:
    client = connect(url, max_connections=64)
    client.connection_pool.connection_class = CountingConnection
    store = RedisStore(client, prefix="bench")
    clock = FakeClock()
    heading("\nRedis store (redis-server on 127.0.0.1, one client process: redis-py connections + hiredis, calls.py)")
    probe = approvals(500, clock, "rt")
    await create_all(store, probe)
    for a in probe[:10]:  # load the scripts
        await store.approvals.decide(cmd(a), now=clock.now())
    before = CountingConnection.writes
    for a in probe[10:]:
        await store.approvals.decide(cmd(a), now=clock.now())
    per_decide = (CountingConnection.writes - before) / len(probe[10:])
    d = await decide_bench(store, clock, args.seq, args.conc)
    sha = await client.script_load("return redis.call('HGET', KEYS[1], 'status')")
    floor = []
    for _ in range(args.seq):  # on the path the store's own calls take (its script connections)
        t0 = time.perf_counter()
        await store.conn.scripts.evalsha(sha, ["bench:floor"], [])
        floor.append((time.perf_counter() - t0) * 1000)
    row("decide latency, sequential median", f"{d['median']:.3f} ms", "<= 0.2 ms", d["median"] <= 0.2)
    row("  floor: a trivial EVALSHA on the same client, median", f"{median(floor):.3f} ms", "(same run)")
    chart(
        "Redis: one decision, sequential (median)",
        "ms",
        [bar("hitl decide (one EVALSHA)", [d["median"]]), bar("floor: a trivial EVALSHA", [median(floor)], floor=True)],
        goal=0.2,
        goal_label="<= 0.2 ms",
    )
    row("decide latency, sequential p99", f"{d['p99']:.3f} ms", "")
    row("decide throughput, 50 concurrent callers", f"{d['rate']:,.0f} /s", ">= 8,000 /s", d["rate"] >= 8000)
    row("Redis commands (round trips) per decide", f"{per_decide:.2f}", "== 1", abs(per_decide - 1) < 0.01)
    wake_row("decision -> waiter wake-up p50 / p99", await wake_bench(store, store, clock), 1)
    await client.flushdb()
    lists = await list_bench(store, clock, args.sizes)
    for size, ms in lists.items():
        target = 4 if size >= 100_000 else 20
        row(f"list one page of 50, {size:,} pending", f"{ms:.2f} ms", f"<= {target} ms", ms <= target)
    ratio = lists[args.sizes[-1]] / lists[args.sizes[0]]
    row(f"flatness: {args.sizes[-1]:,} vs {args.sizes[0]:,} pending", f"{ratio:.2f}x", "~1x (flat)", ratio < 2)
    keys = [f"bench:{{{a.id}}}" for a in approvals(200, FakeClock(), f"list{args.sizes[0]}-")]
    usage = [int(await client.memory_usage(k) or 0) + int(await client.memory_usage(k + ":doc") or 0) for k in keys]
    audit = [int(await client.memory_usage(k + ":audit") or 0) for k in keys]
    info = await client.info("memory")
    per_total = int(info["used_memory"]) / args.sizes[-1]
    row(
        "bytes per pending approval (MEMORY USAGE hash + doc)",
        f"{median(usage):,.0f} B",
        "<= 2,048 B",
        median(usage) <= 2048,
    )
    row("  + its audit list (1 entry)", f"{median(audit):,.0f} B", "")
    row("  used_memory / pending (everything, incl. indexes)", f"{per_total:,.0f} B", "")
    await store.close()


def bare_commits(path: Path, synchronous: str, n: int) -> float:
    """The median ms of ``n`` bare commits of one row each (the floor of a SQLite decide)."""
    floor = BareCommits(path, synchronous)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        floor.commit()
        times.append((time.perf_counter() - t0) * 1000)
    floor.close()
    return median(times)


async def sqlite_part(args: argparse.Namespace, synchronous: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "bench.db"
        store = SqliteStore(db, synchronous=synchronous)
        clock = FakeClock()
        heading(f"\nSQLite store (WAL, synchronous={synchronous.upper()}, one file)")
        d2 = await decide_bench(store, clock, args.seq, args.conc // 2)
        floor = bare_commits(Path(d) / "floor.db", synchronous, args.seq)
        row("decide latency, sequential median", f"{d2['median']:.3f} ms", "<= 1 ms", d2["median"] <= 1)
        row("  floor: a bare commit of one row (same settings), median", f"{floor:.3f} ms", "(same run)")
        chart(
            f"SQLite ({synchronous.upper()}): one decision, sequential (median)",
            "ms",
            [bar("hitl decide (one transaction)", [d2["median"]]), bar("floor: a bare commit", [floor], floor=True)],
            goal=1.0,
            goal_label="<= 1 ms",
        )
        row("decide latency, sequential p99", f"{d2['p99']:.3f} ms", "")
        row("decide throughput, 50 concurrent callers", f"{d2['rate']:,.0f} /s", "")
        wake_row("decision -> waiter wake-up p50 / p99, same process", await wake_bench(store, store, clock), 10)
        other = SqliteStore(db, synchronous=synchronous)  # another connection: what another process looks like
        wake_row("  the same, decided by another connection (a poll)", await wake_bench(store, other, clock), 10)
        await other.close()
        if synchronous == "normal":
            await store.close()
            db.unlink()
            store = SqliteStore(db, synchronous=synchronous)
            lists = await list_bench(store, clock, args.sizes)
            for size, ms in lists.items():
                row(f"list one page of 50, {size:,} pending", f"{ms:.2f} ms", "<= 20 ms", ms <= 20)
            ratio = lists[args.sizes[-1]] / lists[args.sizes[0]]
            row(f"flatness: {args.sizes[-1]:,} vs {args.sizes[0]:,} pending", f"{ratio:.2f}x", "~1x", ratio < 2)
            await store.close()
            size = sum(os.path.getsize(p) for p in Path(d).iterdir())
            row("bytes per approval on disk (file / approvals)", f"{size / args.sizes[-1]:,.0f} B", "(reported)")
        else:
            await store.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seq", type=int, default=2000, help="sequential decides")
    ap.add_argument("--conc", type=int, default=20000, help="decides for the concurrency run")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], help="pending counts")
    args = ap.parse_args()
    heading(f"hitl store benchmark ({os.cpu_count()} cores, run {uuid.uuid4().hex[:6]})")
    with redis_server() as url:
        await redis_part(url, args)
    await sqlite_part(args, "normal")
    await sqlite_part(args, "full")


if __name__ == "__main__":
    with report("store", "Store operations: decide, wake-up, pending pages, bytes"):
        asyncio.run(main())
