"""Pause -> decide -> resume cycles: hitl's runner on both stores vs LangGraph interrupt()/Command(resume=...).

Same shape on both sides: prepare -> approval -> finish, one new thread/session per cycle. The contenders run in
interleaved rounds (each round runs every contender in turn), so a slow patch of the machine hits them all alike;
each figure is the min / median / max of the per-round medians. Also printed: store round trips (Redis) and
transactions (SQLite) per cycle, SQLite inline on the event loop against the same transactions through a thread,
and bytes stored per finished run. Needs the `bench` extra (langgraph).
"""

from __future__ import annotations

import asyncio
import cProfile
import functools
import gc
import os
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BareCommits, CountingConnection, heading, interleaved_options, redis_server, row  # noqa: E402
from redis.asyncio import Connection, Redis  # noqa: E402
from report import bar, chart, report  # noqa: E402

from hitl.engine.domain.models import DecisionKind  # noqa: E402
from hitl.engine.domain.records import chain_link  # noqa: E402
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.oversight.freshness import FRESH_FOR  # noqa: E402
from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.runtime.compose import compose  # noqa: E402
from hitl.engine.storage.redis import RedisStore, connect  # noqa: E402
from hitl.engine.storage.sqlite import SqliteStore  # noqa: E402
from hitl.engine.storage.sqlite.connection import CHAIN_LINK_SQL, SqliteConnection  # noqa: E402
from hitl.engine.workflow.definition import load_workflow  # noqa: E402
from hitl.testing import FakeClock  # noqa: E402

HERE = Path(__file__).resolve().parent / "cycle"


class HitlCycles:
    """hitl's runner on one store: start (runs `prepare`, pauses on `act`), decide, resume (runs `act`, `finish`)."""

    def __init__(self, store: Store) -> None:
        self.wf = load_workflow(HERE / "workflow.yaml")
        context = compose(
            store=store, clock=FakeClock(), config_path=str(HERE / "hitl.yaml"), workflow=self.wf, worker_id="bench"
        )
        self.svc, self.runner = context.service, context.runner
        self.ids: tuple[str, ...] = ()
        """The last cycle's run and approval ids."""

    async def cycle(self) -> None:
        r = await self.runner.start(self.wf, {})  # a new session: the runner names it
        assert r.status is RunStatus.PAUSED and r.approval is not None
        self.ids = (r.session_id, r.approval.id)
        await self.svc.decide(
            DecideRequest(
                r.approval.id,
                "U_OPS",
                DecisionKind.APPROVE,
                expected_version=r.approval.version,
                expected_hash=r.approval.action_hash,
            )
        )
        done = await self.runner.resume(r.session_id)
        assert done.status is RunStatus.COMPLETED


class S(TypedDict):
    value: int
    approved: bool


def langgraph_cycle(saver: Any) -> Callable[[], None]:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    def prepare(s: S) -> dict[str, Any]:
        return {"value": s["value"] + 1}

    def approval(s: S) -> dict[str, Any]:
        answer = interrupt({"tool": "act", "args": {"value": s["value"]}})
        return {"approved": answer == "approve", "value": s["value"] * 2}

    def finish(s: S) -> dict[str, Any]:
        return {"value": s["value"] + 3}

    g: Any = StateGraph(S)
    g.add_node("prepare", prepare)
    g.add_node("approval", approval)
    g.add_node("finish", finish)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "approval")
    g.add_edge("approval", "finish")
    g.add_edge("finish", END)
    app: Any = g.compile(checkpointer=saver)
    count = iter(range(10**9))

    def cycle() -> None:
        cfg = {"configurable": {"thread_id": f"t{next(count)}"}}
        out = app.invoke({"value": 1, "approved": False}, cfg)
        assert "__interrupt__" in out
        final = app.invoke(Command(resume="approve"), cfg)
        assert final["value"] == 7

    return cycle


def bare_evalshas(store: RedisStore, sha: str, per_cycle: int = 7) -> Callable[[], Awaitable[None]]:
    """The floor of a Redis cycle: as many trivial ``EVALSHA`` round trips as a hitl cycle makes, on the path the
    store's own calls take (its script connections)."""

    async def cycle() -> None:
        for _ in range(per_cycle):
            await store.conn.scripts.evalsha(sha, ["cycle:floor"], [])

    return cycle


class Replays:
    """A floor below any runner: one recorded cycle's own store traffic (every SQL statement with its values, or
    every Redis request as the client sent it), sent again with nothing between them. Each replay swaps the run's
    and the approval's ids for new ones of the same length, so it writes new rows or keys as a cycle does. All the
    replays are prepared before any is timed."""

    def __init__(self, ids: tuple[str, ...], count: int) -> None:
        self.ids = ids
        self.count = count

    def fresh(self) -> Iterator[dict[str, str]]:
        for k in range(self.count):
            yield {old: f"{old[:4]}{k:0{len(old) - 4}d}"[: len(old)] for old in self.ids}

    @staticmethod
    def swap(value: Any, ids: dict[str, str]) -> Any:
        if isinstance(value, str | bytes):
            for old, new in ids.items():
                value = value.replace(old, new) if isinstance(value, str) else value.replace(old.encode(), new.encode())
        return value


Statement = tuple[str, Any]


class SqlReplay(Replays):
    """A cycle's SQL statements replayed on a database of the store's schema, with the same settings."""

    def __init__(self, statements: list[Statement], ids: tuple[str, ...], path: Path, sync: str, count: int) -> None:
        super().__init__(ids, count)
        self.conn = _connect(path, isolation_level=None, check_same_thread=False)
        self.conn.create_function(CHAIN_LINK_SQL, 2, chain_link, deterministic=True)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {sync}")
        self.batches = iter([[(sql, self._values(values, ids)) for sql, values in statements] for ids in self.fresh()])

    def _values(self, values: Any, ids: dict[str, str]) -> Any:
        if isinstance(values, dict):
            return {k: self.swap(v, ids) for k, v in values.items()}
        return tuple(self.swap(v, ids) for v in values)

    def cycle(self) -> None:
        execute = self.conn.execute
        for sql, values in next(self.batches):
            execute(sql, values)

    def close(self) -> None:
        self.conn.close()


class RedisReplay(Replays):
    """A cycle's Redis requests (each round trip's bytes, and how many replies it waits for) sent again on
    a connection of its own."""

    def __init__(self, trips: list[tuple[bytes, int]], ids: tuple[str, ...], client: Redis, count: int) -> None:
        super().__init__(ids, count)
        self.client = client
        self.batches = iter([[(self.swap(sent, ids), replies) for sent, replies in trips] for ids in self.fresh()])
        self.conn: Connection | None = None

    async def cycle(self) -> None:
        if self.conn is None:  # of its own, to the same server with the client's settings; connects on first send
            self.conn = Connection(**self.client.connection_pool.connection_kwargs)
        for sent, replies in next(self.batches):
            await self.conn.send_packed_command(sent, check_health=False)
            for _ in range(replies):
                reply = await self.conn.read_response()
                if isinstance(reply, Exception):
                    raise reply

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.disconnect()


class RecordingConnection(CountingConnection):
    """Notes each round trip's bytes, and the replies read for it, while :attr:`on`."""

    on = False
    trips: list[list[Any]] = []

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if RecordingConnection.on:
            sent = command if isinstance(command, bytes | bytearray) else b"".join(command)
            RecordingConnection.trips.append([bytes(sent), 0])
        await super().send_packed_command(command, check_health)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        reply = await super().read_response(*args, **kwargs)
        if RecordingConnection.on:
            RecordingConnection.trips[-1][1] += 1
        return reply


async def prefix_bytes(client: Redis, prefix: str) -> int:
    """What the keys under ``prefix`` take in Redis (``MEMORY USAGE``, every element counted), and nothing else:
    the server also holds the recorded cycle and its replays (the floor), which are not hitl's runs."""
    total = 0
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        total += int(await client.memory_usage(key, samples=0) or 0)
    return total


async def record_redis(url: str) -> tuple[list[tuple[bytes, int]], tuple[str, ...]]:
    """One cycle's Redis round trips, after warm-up cycles (the scripts loaded), on a client of its own."""
    client = connect(url)
    client.connection_pool.connection_class = RecordingConnection
    h = HitlCycles(RedisStore(client, prefix="recorded"))
    for _ in range(20):
        await h.cycle()
    RecordingConnection.trips.clear()
    RecordingConnection.on = True
    try:
        await h.cycle()
    finally:
        RecordingConnection.on = False
    await client.aclose()
    return [(sent, replies) for sent, replies in RecordingConnection.trips], h.ids


async def record_sqlite(path: Path) -> tuple[list[Statement], tuple[str, ...]]:
    """One cycle's SQL statements, after warm-up cycles, on a store of its own (see :func:`_counting_connect`)."""
    store = SqliteStore(path)
    h = HitlCycles(store)
    for _ in range(20):
        await h.cycle()
    RECORDED.clear()
    RECORDING[0] = True
    try:
        await h.cycle()
    finally:
        RECORDING[0] = False
    await store.close()
    return list(RECORDED), h.ids


async def schema_only(path: Path) -> None:
    """A database file with the store's schema and nothing in it."""
    store = SqliteStore(path)
    await store.halts.active()
    await store.close()


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.iterdir() if p.is_file())


Cycle = Callable[[], Awaitable[None] | None]


async def timed(cycle: Cycle, n: int) -> float:
    """The median of ``n`` cycles, in ms."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = cycle()
        if out is not None:
            await out
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


COUNTED = 100
"""Cycles the store calls are counted over."""


class SwitchReads:
    """Counts the periodic reads while it is entered: the stop switch's of the halt orders and the reviewer
    directory's of the delegations in force. Each is read again every :data:`~hitl.engine.oversight.freshness.FRESH_FOR`
    seconds whatever the traffic, so they are told apart from a cycle's own store calls (one read each, a
    transaction on SQLite, a round trip on Redis)."""

    def __init__(self, h: HitlCycles) -> None:
        self.ports: list[Any] = [h.svc.store.halts, h.svc.store.delegations]
        self.reads = 0

    def __enter__(self) -> SwitchReads:
        for port in self.ports:
            original = port.active

            async def active(*args: Any, _original: Any = original, **kw: Any) -> Any:
                self.reads += 1
                return await _original(*args, **kw)

            port.active = active
        return self

    def __exit__(self, *exc: object) -> None:
        for port in self.ports:
            del port.active  # the class's method again


async def count_transactions(h: HitlCycles) -> tuple[float, int]:
    """SQLite transactions per cycle (every store call is one), and the switch's reads among them."""
    calls = 0
    original = SqliteConnection.run

    async def counting(self: SqliteConnection, fn: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        return await original(self, fn, **kw)

    SqliteConnection.run = counting  # type: ignore[method-assign]
    try:
        with SwitchReads(h) as switch:
            for _ in range(COUNTED):
                await h.cycle()
    finally:
        SqliteConnection.run = original  # type: ignore[method-assign]
    return (calls - switch.reads) / COUNTED, switch.reads


async def count_round_trips(h: HitlCycles) -> tuple[float, int]:
    """Redis round trips per cycle: what the client writes to its sockets (a command or a pipeline each), and the
    switch's reads among them."""
    before = CountingConnection.writes
    with SwitchReads(h) as switch:
        for _ in range(COUNTED):
            await h.cycle()
    return (CountingConnection.writes - before - switch.reads) / COUNTED, switch.reads


Match = Callable[[str, str], bool]
CATEGORIES: tuple[tuple[str, Match], ...] = (
    ("SQL statements (sqlite3 execute)", lambda f, n: n in ("<method 'execute' of 'sqlite3.Connection' objects>",)),
    ("JSON (json, orjson)", lambda f, n: "json" in f or "orjson" in n),
    ("pydantic validation and dumps", lambda f, n: "pydantic" in f or "pydantic_core" in n),
    ("hashes and audit links (canonical JSON, SHA)", lambda f, n: "hashing" in f or "_hashlib" in n),
    ("templates (Jinja sandbox)", lambda f, n: "jinja2" in f or "templates" in f),
    ("argument validation (jsonschema)", lambda f, n: "jsonschema" in f or "arg_schema" in f),
    ("event loop (asyncio)", lambda f, n: "asyncio" in f or "selectors" in f or "epoll" in n),
)


async def breakdown(h: HitlCycles, n: int = 200) -> tuple[list[tuple[str, float]], float, float]:
    """Where a cycle's CPU goes, by a profile of ``n`` cycles: (category, share) pairs, the profiled ms per cycle,
    and SQL statements per cycle (counted by SQLite's trace hook)."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        await h.cycle()
    profile.disable()
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())
    shares = []
    seen: set[Any] = set()
    for label, match in CATEGORIES:
        own = [k for k in stats if k not in seen and match(k[0], k[2])]
        seen.update(own)
        shares.append((label, sum(stats[k][2] for k in own) / total))
    shares.append(("everything else (the runner, the store's Python)", 1 - sum(x for _, x in shares)))
    before = STATEMENTS[0]
    for _ in range(20):
        await h.cycle()
    return shares, total / n * 1000, (STATEMENTS[0] - before) / 20


STATEMENTS = [0]
"""SQL statements run on connections to a database named ``count.db`` (see :func:`_counting_connect`)."""
RECORDING = [False]
RECORDED: list[Statement] = []
"""The statements (with their values) run on connections to a database named ``record.db`` while recording."""
_connect = sqlite3.connect


class _Recording(sqlite3.Connection):
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if RECORDING[0]:
            RECORDED.append((sql, parameters))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)
        if RECORDING[0]:
            RECORDED.extend((sql, row) for row in rows)  # replayed one by one: a floor, never above the real
        return super().executemany(sql, rows)


def _counting_connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
    name = Path(str(database)).name
    if name == "record.db":
        kwargs["factory"] = _Recording
    conn: sqlite3.Connection = _connect(database, *args, **kwargs)
    if name == "count.db":
        conn.set_trace_callback(lambda _: STATEMENTS.__setitem__(0, STATEMENTS[0] + 1))
    return conn


# The store opens its connections lazily, through the module's function.
sqlite3.connect = _counting_connect  # type: ignore[assignment]


async def main() -> None:
    a, per = interleaved_options(__doc__, n=1000, warm=100)
    heading(
        f"hitl cycle benchmark: {a.rounds} interleaved rounds of {per} sequential pause -> decide -> resume cycles "
        f"per contender, after {a.warm} warm-up ({os.cpu_count()} cores)"
    )
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory() as tmp, redis_server() as url:
        dirs: dict[str, Path] = {}
        contenders: dict[str, Cycle] = {}
        stores: list[Store] = []
        for sync in ("normal", "full"):
            for inline in (True, False):
                label = f"hitl SQLite {sync.upper()}" + ("" if inline else " (thread)")
                dirs[label] = Path(tmp) / label.replace(" ", "_")
                store = SqliteStore(dirs[label] / "hitl.db", synchronous=sync, inline=inline)
                stores.append(store)
                contenders[label] = HitlCycles(store).cycle
        client = connect(url)
        client.connection_pool.connection_class = CountingConnection
        rstore = RedisStore(client, prefix="cycle")
        stores.append(rstore)
        redis_cycles = HitlCycles(rstore)
        contenders["hitl Redis"] = redis_cycles.cycle
        contenders["LangGraph InMemorySaver"] = langgraph_cycle(InMemorySaver())
        floor_dir = Path(tmp) / "floor"
        floor_dir.mkdir()
        for sync in ("NORMAL", "FULL"):
            contenders[f"floor: 7 bare SQLite commits ({sync})"] = functools.partial(
                BareCommits(floor_dir / f"{sync}.db", sync).commit, 7
            )
        sha = await client.script_load("return redis.call('GET', KEYS[1])")
        contenders["floor: 7 bare EVALSHA round trips (Redis)"] = bare_evalshas(rstore, sha)
        replays = a.warm + a.rounds * per
        recorded_sql, sql_ids = await record_sqlite(Path(tmp) / "recorded" / "record.db")
        sql_replays: list[SqlReplay] = []
        for sync in ("NORMAL", "FULL"):
            path = Path(tmp) / f"replay_{sync}" / "replay.db"
            await schema_only(path)
            sql_replays.append(SqlReplay(recorded_sql, sql_ids, path, sync, replays))
            contenders[f"floor: a cycle's own SQL, replayed ({sync})"] = sql_replays[-1].cycle
        trips, redis_ids = await record_redis(url)
        redis_replay = RedisReplay(trips, redis_ids, client, replays)
        contenders["floor: a cycle's own Redis requests, replayed"] = redis_replay.cycle
        lg_dir = Path(tmp) / "lg"
        lg_dir.mkdir()
        conn = sqlite3.connect(lg_dir / "lg.db", check_same_thread=False)
        contenders["LangGraph SqliteSaver"] = langgraph_cycle(SqliteSaver(conn))
        lg_sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[conn.execute("PRAGMA synchronous").fetchone()[0]]

        for cycle in contenders.values():
            await timed(cycle, a.warm)
        gc.collect()
        gc.freeze()
        rounds: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(a.rounds):
            for label, cycle in contenders.items():
                rounds[label].append(await timed(cycle, per))
        done = a.warm + a.rounds * per
        redis_bytes = await prefix_bytes(client, "cycle") / done
        counted = SqliteStore(Path(tmp) / "count.db")
        sqlite_tx = await count_transactions(HitlCycles(counted))
        shares, profiled_ms, statements = await breakdown(HitlCycles(counted))
        redis_rt = await count_round_trips(redis_cycles)
        for each in (*stores, counted):
            await each.close()  # the last connection to a WAL database folds the WAL into the file
        for replay in sql_replays:
            replay.close()
        await redis_replay.close()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        sizes = {label: dir_bytes(d) / done for label, d in dirs.items() if "thread" not in label}
        sizes["hitl Redis"] = redis_bytes
        sizes["LangGraph SqliteSaver"] = dir_bytes(lg_dir) / done

    m = {k: statistics.median(v) for k, v in rounds.items()}
    row("contender: cycle, ms (min / median / max of round medians)", "", "")
    for label, r in rounds.items():
        row(label, f"{min(r):.3f} / {m[label]:.3f} / {max(r):.3f}", "")
    heading(f"  (LangGraph SqliteSaver: WAL, synchronous={lg_sync}; hitl SQLite: WAL, the setting shown)")
    chart(
        "Pause -> decide -> resume cycle (a new run each), same run: hitl, LangGraph, and the stores' floors",
        "ms per cycle",
        [bar(label, r, floor=not label.startswith("hitl")) for label, r in rounds.items()],
    )

    def ratio(peer: str, ours: str) -> float:
        return m[peer] / m[ours]

    heading("\n  ratios (LangGraph median / hitl median; higher is better for hitl)")
    for ours, peer, target in (
        ("hitl Redis", "LangGraph InMemorySaver", 3.0),
        ("hitl Redis", "LangGraph SqliteSaver", 7.0),
        ("hitl SQLite NORMAL", "LangGraph InMemorySaver", 10.0),
        ("hitl SQLite FULL", "LangGraph SqliteSaver", 5.0),
    ):
        x = ratio(peer, ours)
        row(f"{ours} vs {peer}", f"{x:.2f}x", f">= {target:g}x", x >= target)
    heading(
        "\n  what each goal leaves the runner: the cycle time the goal allows, less that cycle's own store traffic "
        "replayed with nothing between the statements or requests (recorded from one real cycle); beside it, the "
        "runner's share of a hitl cycle now (its median less the same traffic)"
    )
    for ours, peer, target, floor in (
        ("hitl Redis", "LangGraph InMemorySaver", 3.0, "floor: a cycle's own Redis requests, replayed"),
        ("hitl Redis", "LangGraph SqliteSaver", 7.0, "floor: a cycle's own Redis requests, replayed"),
        ("hitl SQLite NORMAL", "LangGraph InMemorySaver", 10.0, "floor: a cycle's own SQL, replayed (NORMAL)"),
        ("hitl SQLite FULL", "LangGraph SqliteSaver", 5.0, "floor: a cycle's own SQL, replayed (FULL)"),
    ):
        budget = m[peer] / target
        row(
            f"{ours} at {target:g}x {peer}: left for the runner (allowed - traffic)",
            f"{budget:.3f} - {m[floor]:.3f} = {budget - m[floor]:+.3f} ms",
        )
        row(f"  the runner's share of a {ours} cycle now", f"{m[ours] - m[floor]:.3f} ms")
    row(
        "SQL statements and Redis round trips replayed per cycle",
        f"{len(recorded_sql)} / {len(trips)}",
        "",
    )
    for sync in ("NORMAL", "FULL"):
        x = m[f"hitl SQLite {sync} (thread)"] / m[f"hitl SQLite {sync}"]
        row(f"SQLite {sync}: inline on the loop vs through a thread", f"{x:.2f}x faster", "")
    heading("\n  store work per cycle")
    row("Redis round trips per cycle", f"{redis_rt[0]:.2f}", "<= 7", redis_rt[0] <= 7)
    row("SQLite transactions per cycle", f"{sqlite_tx[0]:.2f}", "<= 7", sqlite_tx[0] <= 7)
    heading(
        f"  (counted over {COUNTED} cycles, besides the reads of the halt orders and the delegations, each every "
        f"{FRESH_FOR} s whatever the traffic: {redis_rt[1]} on Redis, {sqlite_tx[1]} on SQLite in that span)"
    )
    heading(f"\n  where a cycle's CPU goes (hitl SQLite NORMAL under cProfile, {profiled_ms:.2f} ms a cycle profiled)")
    row("SQL statements per cycle (in its 7 transactions)", f"{statements:.0f}", "")
    for label, share in shares:
        row(label, f"{share:.0%}", "")
    heading("\n  bytes stored per finished run")
    for label, b in sizes.items():
        row(label, f"{b:,.0f} B", "")


if __name__ == "__main__":
    with report("cycle", "Pause -> decide -> resume cycle, against LangGraph"):
        asyncio.run(main())
