"""The PostgreSQL store against its peer on the same server, in interleaved rounds (min / median / max of rounds):

- the pause -> decide -> resume cycle: hitl on PostgreSQL vs LangGraph's ``PostgresSaver`` (interrupt / resume), both
  committing synchronously (``synchronous_commit = on``, fsync on): equal durability;
- decisions per second with 50 concurrent callers, each deciding its own approval (one SERIALIZABLE transaction
  each), beside the same on Redis;
- wake-up latency: a waiter in one store (its own pool and listener), the decision made through another, measured
  from the decision's return to the waiter's wake (NOTIFY), beside Redis pub/sub;
- bytes per finished run (the schema's tables and indexes, after VACUUM);
- the driver: one read-modify-write SERIALIZABLE transaction (the shape of a decision) on asyncpg and on psycopg 3.

Starts its own PostgreSQL (as the tests do) and redis-server on 127.0.0.1. Needs the ``bench`` group.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from _common import (  # noqa: E402
    heading,
    interleaved_options,
    redis_server,
    row,
    spread,
    support_approves,
    wake_after_decision_ms,
)
from cycle_bench import HitlCycles, langgraph_cycle, timed  # noqa: E402
from report import report  # noqa: E402

from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.storage.postgres import PostgresStore  # noqa: E402
from hitl.engine.storage.redis import RedisStore, connect  # noqa: E402
from hitl.testing import FakeClock, make_approval  # noqa: E402
from tests.postgres_server import running_postgres  # noqa: E402 - the same server the tests start

Timed = Callable[[], Awaitable[None] | None]


async def decisions_per_second(store: Store, clock: FakeClock, n: int, callers: int = 50) -> float:
    """``n`` approvals decided by ``callers`` concurrent callers, each its own: decisions per second."""
    made = [make_approval(now=clock.now(), key=f"d{time.perf_counter_ns()}{i}") for i in range(n)]
    for start in range(0, n, 200):
        await asyncio.gather(*(store.approvals.create(a) for a in made[start : start + 200]))
    queue = list(made)

    async def caller() -> None:
        while queue:
            a = queue.pop()
            await store.approvals.decide(support_approves(a), now=clock.now())

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return n / (time.perf_counter() - t0)


async def wake_ms(waiter_store: Store, decider: Store, clock: FakeClock, n: int) -> list[float]:
    """From a decision's return to its waiter's wake, in another store (another pool, another listener), in ms."""
    out = []
    for i in range(n):
        a, _ = await decider.approvals.create(make_approval(now=clock.now(), key=f"w{time.perf_counter_ns()}{i}"))
        out.append(await wake_after_decision_ms(waiter_store, decider, a, support_approves(a), clock, settle=0.005))
    return out


async def driver_round_trips(url: str, n: int) -> dict[str, float]:
    """One SERIALIZABLE read-modify-write of one row (a decision's shape) on each driver: median ms."""
    import asyncpg
    import psycopg

    setup = await asyncpg.connect(url)
    await setup.execute("DROP TABLE IF EXISTS bench_drv; CREATE TABLE bench_drv (id int PRIMARY KEY, v int)")
    await setup.execute("INSERT INTO bench_drv VALUES (1, 0)")
    await setup.close()
    a = await asyncpg.connect(url)
    p = await psycopg.AsyncConnection.connect(url.replace("postgresql://", "postgresql://", 1), autocommit=True)

    async def on_asyncpg() -> None:
        async with a.transaction(isolation="serializable"):
            v = await a.fetchval("SELECT v FROM bench_drv WHERE id = 1")
            await a.execute("UPDATE bench_drv SET v = $1 WHERE id = 1", v + 1)

    async def on_psycopg() -> None:
        async with p.transaction():
            await p.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            cur = await p.execute("SELECT v FROM bench_drv WHERE id = 1")
            got = await cur.fetchone()
            assert got is not None
            await p.execute("UPDATE bench_drv SET v = %s WHERE id = 1", (got[0] + 1,))

    for f in (on_asyncpg, on_psycopg):
        await timed(f, 50)
    rounds: dict[str, list[float]] = {"asyncpg": [], "psycopg 3": []}
    for _ in range(5):
        rounds["asyncpg"].append(await timed(on_asyncpg, n // 5))
        rounds["psycopg 3"].append(await timed(on_psycopg, n // 5))
    await a.close()
    await p.close()
    return {k: statistics.median(v) for k, v in rounds.items()}


class BarePgCommits:
    """The floor of the cycle on this server: 7 single-row commits one after another (one ``INSERT`` each, sent
    without ``BEGIN``: a round trip and a flushed commit apiece), as many as a hitl cycle commits."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.n = 0

    @classmethod
    async def open(cls, url: str) -> BarePgCommits:
        import asyncpg

        conn = await asyncpg.connect(url)
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (k int PRIMARY KEY, v text)")
        return cls(conn)

    async def cycle(self) -> None:
        for _ in range(7):
            self.n += 1
            await self.conn.execute(
                "INSERT INTO bench_floor VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                self.n % 1000,
                "x" * 500,
            )


async def schema_bytes(store: PostgresStore) -> int:
    async def q(c: Any) -> int:
        return int(
            await c.fetchval(
                "SELECT coalesce(sum(pg_total_relation_size(format('%I.%I', schemaname, tablename))), 0) "
                "FROM pg_tables WHERE schemaname = current_schema()"
            )
        )

    return await store.db.run(q, write=False)


async def main() -> None:
    a, per = interleaved_options(__doc__, n=500, warm=50)
    heading(
        f"hitl PostgreSQL benchmark: {a.rounds} interleaved rounds of {per} cycles per contender, after {a.warm} "
        f"warm-up ({os.cpu_count()} cores, server and clients on one machine)"
    )
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    with running_postgres(fsync=True) as url, redis_server() as redis_url:
        clock = FakeClock()
        pg = PostgresStore(url, schema="cycle")
        cycles = HitlCycles(pg)
        lg_conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(lg_conn)
        saver.setup()
        floor = await BarePgCommits.open(url)
        contenders: dict[str, Timed] = {
            "hitl PostgreSQL": cycles.cycle,
            "LangGraph PostgresSaver": langgraph_cycle(saver),
            "floor: 7 bare single-row commits": floor.cycle,
        }
        for cycle in contenders.values():
            await timed(cycle, a.warm)
        rounds: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(a.rounds):
            for label, cycle in contenders.items():
                rounds[label].append(await timed(cycle, per))
        done = a.warm + a.rounds * per
        tx_per_cycle = pg.db.transactions / done
        vacuum = await __import__("asyncpg").connect(url)
        await vacuum.execute("VACUUM ANALYZE")
        await vacuum.close()
        per_run = await schema_bytes(pg) / done
        lg_conn.close()
        await floor.conn.close()

        stores: dict[str, tuple[Store, Store]] = {
            "PostgreSQL": (PostgresStore(url, schema="dps"), PostgresStore(url, schema="dps")),
            "Redis": (RedisStore(connect(redis_url), prefix="dps"), RedisStore(connect(redis_url), prefix="dps")),
        }
        dps: dict[str, list[float]] = {k: [] for k in stores}
        wakes: dict[str, list[float]] = {k: [] for k in stores}
        for one, _ in stores.values():
            await decisions_per_second(one, clock, 200)  # warm-up: pools open, schema migrated
        pg_one = stores["PostgreSQL"][0]
        assert isinstance(pg_one, PostgresStore)
        decided, retried = pg_one.db.transactions, pg_one.db.retries
        for _ in range(3):
            for name, (one, two) in stores.items():
                dps[name].append(await decisions_per_second(one, clock, 1000))
                wakes[name] += await wake_ms(one, two, clock, 40)
        retries = (pg_one.db.retries - retried) / max(1, pg_one.db.transactions - decided)
        drivers = await driver_round_trips(url, 2000)
        for one, two in stores.values():
            await one.close()
            await two.close()
        await pg.close()

    m = {k: statistics.median(v) for k, v in rounds.items()}
    row("pause -> decide -> resume cycle, ms (min / median / max)", "", "")
    for label, r in rounds.items():
        row(label, spread(r, "{:.2f}"), "")
    x = m["LangGraph PostgresSaver"] / m["hitl PostgreSQL"]
    row("hitl PostgreSQL vs LangGraph PostgresSaver", f"{x:.2f}x", ">= 5x", x >= 5)
    best = m["LangGraph PostgresSaver"] / m["floor: 7 bare single-row commits"]
    row("the floor vs LangGraph PostgresSaver (the most any 7-commit cycle could reach)", f"{best:.2f}x", "")
    heading("  (both commit synchronously on the same server: fsync on, synchronous_commit on)")
    row("hitl writing transactions per cycle", f"{tx_per_cycle:.1f}", "")
    heading("\n  decisions per second, 50 concurrent callers (min / median / max of 3 rounds of 1000)")
    for name, v in dps.items():
        row(name, spread(v, "{:,.0f}"), "")
    row("PostgreSQL: transactions run again after a conflict, per commit", f"{retries:.2f}", "")
    heading("\n  wake-up: decision returned -> waiter in another store woken, ms (p50 / p90 / max of 120)")
    for name, w in wakes.items():
        s = sorted(w)
        row(name, f"{s[len(s) // 2]:.2f} / {s[int(len(s) * 0.9)]:.2f} / {s[-1]:.2f}", "")
    heading("\n  storage")
    row("bytes per finished run (tables and indexes, after VACUUM)", f"{per_run:,.0f}", "")
    heading("\n  driver: one SERIALIZABLE read-modify-write, median ms")
    for name, ms in drivers.items():
        row(name, f"{ms:.3f}", "")


if __name__ == "__main__":
    with report("postgres", "PostgreSQL store, against LangGraph's PostgresSaver"):
        asyncio.run(main())
