"""Pause -> decide -> resume cycles: hitl's runner on both stores vs LangGraph interrupt()/Command(resume=...).

Same shape on both sides: prepare -> approval -> finish, one new thread/session per cycle, run sequentially.
Prints medians, p99, ratios and bytes stored per finished run. Needs the `bench` extra (langgraph).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import median, pct, redis_server, row  # noqa: E402

from engine.compose import compose  # noqa: E402
from engine.domain.models import DecisionKind  # noqa: E402
from engine.ports import Store  # noqa: E402
from engine.runner import RunStatus, load_workflow  # noqa: E402
from engine.storage.redis import RedisStore, connect  # noqa: E402
from engine.storage.sqlite import SqliteStore  # noqa: E402
from engine.testing import FakeClock  # noqa: E402

HERE = Path(__file__).resolve().parent / "cycle"


async def hitl_cycles(store: Store, n: int, warm: int) -> list[float]:
    wf = load_workflow(HERE / "workflow.yaml")
    world = compose(store=store, clock=FakeClock(), config_path=str(HERE / "hitl.yaml"), workflow=wf, worker_id="bench")
    svc, runner = world.service, world.runner
    times: list[float] = []
    for i in range(warm + n):
        t0 = time.perf_counter()
        r = await runner.start(wf, {}, session_id=f"ses_{i}_{uuid.uuid4().hex[:6]}")
        assert r.status is RunStatus.PAUSED and r.approval is not None
        await svc.decide(
            r.approval.id,
            "U_OPS",
            DecisionKind.APPROVE,
            expected_version=r.approval.version,
            expected_hash=r.approval.action_hash,
        )
        done = await runner.resume(r.session_id)
        assert done.status is RunStatus.COMPLETED
        _record(times, i, warm, t0)
    return times


def _record(times: list[float], i: int, warm: int, t0: float) -> None:
    """Keep the time of a measured cycle; after warm-up, move setup objects out of the collector's way."""
    if i >= warm:
        times.append((time.perf_counter() - t0) * 1000)
    if i == warm:
        gc.collect()
        gc.freeze()


class S(TypedDict):
    value: int
    approved: bool


def langgraph_cycles(saver: Any, n: int, warm: int) -> list[float]:
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
    times: list[float] = []
    for i in range(warm + n):
        cfg = {"configurable": {"thread_id": f"t{i}"}}
        t0 = time.perf_counter()
        out = app.invoke({"value": 1, "approved": False}, cfg)
        assert "__interrupt__" in out
        final = app.invoke(Command(resume="approve"), cfg)
        assert final["value"] == 7
        _record(times, i, warm, t0)
    return times


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.iterdir() if p.is_file())


def report(label: str, t: list[float]) -> None:
    row(f"{label}: cycle median / p99", f"{median(t):.3f} / {pct(t, 0.99):.3f} ms", "")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=1000, help="measured cycles per contender")
    ap.add_argument("--warm", type=int, default=100)
    a = ap.parse_args()
    gc.enable()
    print(
        f"hitl cycle benchmark: {a.n} sequential pause -> decide -> resume cycles after {a.warm} warm-up "
        f"({os.cpu_count()} cores)"
    )
    res: dict[str, list[float]] = {}
    sizes: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("normal", "full"):
            d = Path(tmp) / f"hitl-{sync}"
            store = SqliteStore(d / "hitl.db", synchronous=sync)
            res[f"hitl SQLite ({sync.upper()})"] = await hitl_cycles(store, a.n, a.warm)
            await store.close()
            sizes[f"hitl SQLite ({sync.upper()})"] = dir_bytes(d) / (a.n + a.warm)
        with redis_server() as url:
            client = connect(url)
            rstore = RedisStore(client, prefix="cycle")
            res["hitl Redis"] = await hitl_cycles(rstore, a.n, a.warm)
            used = int((await client.info("memory"))["used_memory_dataset"])
            sizes["hitl Redis"] = used / (a.n + a.warm)
            await rstore.close()

        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.checkpoint.sqlite import SqliteSaver

        res["LangGraph InMemorySaver"] = langgraph_cycles(InMemorySaver(), a.n, a.warm)
        lg_dir = Path(tmp) / "lg"
        lg_dir.mkdir()
        conn = sqlite3.connect(lg_dir / "lg.db", check_same_thread=False)
        saver = SqliteSaver(conn)
        res["LangGraph SqliteSaver"] = langgraph_cycles(saver, a.n, a.warm)
        lg_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        lg_sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[conn.execute("PRAGMA synchronous").fetchone()[0]]
        conn.close()
        sizes["LangGraph SqliteSaver"] = dir_bytes(lg_dir) / (a.n + a.warm)

    row("contender", "latency", "")
    for label, t in res.items():
        report(label, t)
    print(f"  (LangGraph SqliteSaver: journal_mode={lg_mode}, synchronous={lg_sync}; hitl SQLite: WAL, setting shown)")
    m = {k: median(v) for k, v in res.items()}
    r1 = m["LangGraph InMemorySaver"] / m["hitl Redis"]
    r2 = m["LangGraph SqliteSaver"] / m["hitl Redis"]
    same = f"hitl SQLite ({lg_sync})" if f"hitl SQLite ({lg_sync})" in m else "hitl SQLite (FULL)"
    r3 = m["LangGraph SqliteSaver"] / m[same]
    print("\n  ratios (LangGraph median / hitl median; higher is better for hitl)")
    row("hitl Redis vs LangGraph InMemorySaver", f"{r1:.2f}x", ">= 3x", r1 >= 3)
    row("hitl Redis vs LangGraph SqliteSaver", f"{r2:.2f}x", ">= 7x", r2 >= 7)
    row(f"{same} vs LangGraph SqliteSaver ({lg_sync}, equal durability)", f"{r3:.2f}x", ">= 2x", r3 >= 2)
    print("\n  bytes stored per finished run")
    for label, b in sizes.items():
        row(label, f"{b:,.0f} B", "")


if __name__ == "__main__":
    asyncio.run(main())
