"""What each finished run of the cycle benchmark leaves stored, by table or key, for one or more trees: no timing,
so a loaded machine measures it as well as a quiet one.

    .venv/bin/python bench/stored_bytes.py ../old-tree . [-n 200] [--stores sqlite,redis,postgres]

Each tree runs in a process of its own (``PYTHONPATH`` that tree, its own ``bench/cycle_bench.py`` cycle), on a new
SQLite file, a private redis-server and a private PostgreSQL server. A figure is the difference between what is
stored after the warm-up cycles and after ``n`` more, divided by ``n``: fixed costs (the schema's first pages, the
first chain heads) fall out. SQLite: ``dbstat`` by table and index (pages, payload, unused bytes in its pages);
Redis: ``MEMORY USAGE`` by key shape (the run's and approval's ids replaced); PostgreSQL: ``pg_relation_size`` by
table and index (old row versions included until a vacuum: this figure moves with the autovacuum), and each table's
live rows' own bytes (``pg_column_size``), which do not.
``cycle_bench.py``'s "bytes per finished run" is the SQLite file's and the Redis keys' total of the same runs.
Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WARM = 30
"""Cycles before the first snapshot."""

Sizes = dict[str, dict[str, float]]
"""Per table, index or key shape: each measure."""


def sqlite_sizes(path: Path) -> Sizes:
    """Every table's and index's pages, payload and unused bytes (``dbstat``), and the file's pages."""
    with sqlite3.connect(path) as db:
        out: Sizes = {
            name: {"pages": pages, "bytes": size, "payload": payload, "unused": unused, "rows": cells}
            for name, pages, size, payload, unused, cells in db.execute(
                "SELECT name, count(*), sum(pgsize), sum(payload), sum(unused), sum(ncell) FROM dbstat GROUP BY name"
            )
        }
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    out["(the file)"] = {"pages": pages, "bytes": pages * size}
    return out


async def redis_sizes(client: Any, prefix: str, ids: set[str]) -> Sizes:
    """``MEMORY USAGE`` of every key under ``prefix`` and its element count, summed by key shape."""
    out: Sizes = {}
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        name = key.decode() if isinstance(key, bytes) else key
        kind = await client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        for each in ids:
            name = name.replace(each, "<id>")
        count = {"zset": client.zcard, "hash": client.hlen, "set": client.scard, "list": client.llen}.get(kind)
        s = out.setdefault(f"{name} ({kind})", {"keys": 0, "bytes": 0, "elements": 0})
        s["keys"] += 1
        s["bytes"] += int(await client.memory_usage(key, samples=0) or 0)
        s["elements"] += int(await count(key)) if count else 1
    return out


async def postgres_sizes(store: Any) -> Sizes:
    """Every table's and index's ``pg_relation_size`` in the store's schema, and each table's live rows' bytes
    (``pg_column_size`` of each row)."""

    async def read(c: Any) -> list[Any]:
        return list(
            await c.fetch(
                "SELECT c.relname, c.relkind, pg_relation_size(c.oid) AS size FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                "AND c.relkind IN ('r', 'i')"
            )
        )

    async def live(c: Any, table: str) -> int:
        return int(await c.fetchval(f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "{table}" t') or 0)

    out: Sizes = {}
    for r in await store.db.run(read, write=False):
        table = r["relname"]
        if r["relkind"] in ("i", b"i"):
            out[f"{table} (index)"] = {"bytes": r["size"]}
        else:  # its live rows' own bytes too: the same on every run, vacuumed or not
            rows = await store.db.run(lambda c, t=table: live(c, t), write=False)
            out[f"{table} (table)"] = {"bytes": r["size"], "live rows' bytes": rows}
    return out


def per_run(before: Sizes, after: Sizes, n: int) -> Sizes:
    """What ``n`` runs added, per run."""
    out: Sizes = {}
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name, {}), after.get(name, {})
        out[name] = {m: (a.get(m, 0) - b.get(m, 0)) / n for m in sorted(set(a) | set(b))}
    return out


async def cycles(make: Any, n: int, ids: set[str]) -> None:
    """``n`` cycles of ``make`` (a tree's ``HitlCycles``), their run and approval ids noted."""
    for _ in range(n):
        await make.cycle()
        ids.update(make.ids)


async def measure(tree: Path, n: int, stores: list[str]) -> dict[str, Sizes]:
    """This tree's figures (run in a process whose ``PYTHONPATH`` is ``tree``)."""
    sys.path.insert(0, str(tree / "bench"))
    import cycle_bench
    from _common import redis_server

    from hitl.engine.storage.redis import RedisStore, connect
    from hitl.engine.storage.sqlite import SqliteStore

    found: dict[str, Sizes] = {}
    ids: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        if "sqlite" in stores:
            path = Path(tmp) / "hitl.db"
            store: Any = SqliteStore(path)
            runs = cycle_bench.HitlCycles(store)
            await cycles(runs, WARM, ids)
            before = sqlite_sizes(path)
            await cycles(runs, n, ids)
            found["sqlite"] = per_run(before, sqlite_sizes(path), n)
            await store.close()
        if "redis" in stores:
            with redis_server() as url:
                client = connect(url)
                store = RedisStore(client, prefix="cycle")
                runs = cycle_bench.HitlCycles(store)
                await cycles(runs, WARM, ids)
                before = await redis_sizes(client, "cycle", ids)
                await cycles(runs, n, ids)
                found["redis"] = per_run(before, await redis_sizes(client, "cycle", ids), n)
                await store.close()
                await client.aclose()
        if "postgres" in stores:
            sys.path.insert(0, str(tree))
            from hitl.engine.storage.postgres import PostgresStore
            from tests.postgres_server import running_postgres

            with running_postgres() as url:
                store = PostgresStore(url, schema="cycle")
                runs = cycle_bench.HitlCycles(store)
                await cycles(runs, WARM, ids)
                before = await postgres_sizes(store)
                await cycles(runs, n, ids)
                found["postgres"] = per_run(before, await postgres_sizes(store), n)
                await store.close()
    return found


def table(results: dict[str, dict[str, Sizes]], store: str, n: int) -> None:
    """One store's figures, a row per table or key shape that grew in any tree, a column per tree and measure."""
    trees = list(results)
    names = sorted({name for r in results.values() for name in r.get(store, {})})
    measures = sorted({m for r in results.values() for s in r.get(store, {}).values() for m in s})
    print(f"\n{store}: per finished run (the difference over {n} runs)\n")
    print("| table, index or key | " + " | ".join(f"{m}: {t}" for m in measures for t in trees) + " |")
    print("|---|" + "---|" * (len(measures) * len(trees)))
    for name in names:
        cells = [results[t].get(store, {}).get(name, {}).get(m, 0.0) for m in measures for t in trees]
        if any(cells):
            print(f"| {name} | " + " | ".join(f"{c:,.1f}" for c in cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("-n", type=int, default=200, help="cycles measured after the warm-up")
    parser.add_argument("--stores", default="sqlite,redis", help="of sqlite, redis, postgres")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one tree, in its own process
    opts = parser.parse_args()
    stores = opts.stores.split(",")
    if opts.measure:
        print(json.dumps(asyncio.run(measure(opts.trees[0].resolve(), opts.n, stores))))
        return
    results: dict[str, dict[str, Sizes]] = {}
    for tree in (t.resolve() for t in opts.trees):
        done = subprocess.run(
            [sys.executable, __file__, str(tree), "-n", str(opts.n), "--stores", opts.stores, "--measure"],
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tree,
            check=True,
            capture_output=True,
            text=True,
        )
        results[tree.name] = json.loads(done.stdout.strip().splitlines()[-1])
    for store in stores:
        table(results, store, opts.n)


if __name__ == "__main__":
    main()
