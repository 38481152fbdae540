"""Consequence cost: what computing a tool's consequence adds to a proposal before its approval is stored and its
card announced, per store and per way of running it.

Each round proposes CALLS approvals of three kinds, in rotated order: a tool without a consequence (the floor: the
same proposal, nothing computed), the same tool with a consequence run in a thread of this process (an in-process
``ask``, ``guard`` or tool gate), and run in a worker process as ``hitl serve`` does (a warm worker from the tool's
pool: JSON over a pipe each way). The consequence (``bench/consequence/sample.py``) does nearly nothing, so the
figure is hitl's: the copy of the arguments, the thread or the worker's round trip, the result checked, redacted and
digested, the audit entry and the counts. Wall-clock time per proposal (the worker runs in another process: its
time is what delays the card), median of each round; the verdict is the median over rounds of each round's
(consequence - floor), with the 95% confidence interval of that median. Targets: at most 1 ms added in a thread, 5 ms
in a worker process.

Run with `make bench` (or `.venv/bin/python bench/consequence_bench.py [--rounds 21 --calls 40]`). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "consequence"))  # where a worker imports sample from

from _common import heading, median, median_ci, redis_server, row  # noqa: E402
from report import Bar, bar, chart, report  # noqa: E402

from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.config.hitl_yaml import parse_config  # noqa: E402
from hitl.engine.consequences.threads import ThreadConsequences  # noqa: E402
from hitl.engine.consequences.workers import WorkerConsequences  # noqa: E402
from hitl.engine.domain.requests import ProposeRequest  # noqa: E402
from hitl.engine.service import ApprovalService  # noqa: E402
from hitl.engine.storage import open_store  # noqa: E402

CONFIG = parse_config(
    """
roles: {support: [U_SUPPORT1]}
policy:
  tools:
    plain: {role: support}
    refund: {role: support, consequence: "sample:refund"}
"""
)
TARGETS_MS = {"thread": 1.0, "worker process": 5.0}
"""What a consequence that does nearly nothing may add to a proposal, per way of running it."""


async def proposals(svc: ApprovalService, tool: str, calls: int) -> float:
    """The median wall-clock ms of ``calls`` proposals of ``tool``, one after another."""
    took = []
    for i in range(calls):
        request = ProposeRequest(tool, {"order_id": f"O{i}", "amount": 30}, session_id=uuid.uuid4().hex)
        t0 = time.perf_counter()
        p = await svc.propose(request)
        took.append((time.perf_counter() - t0) * 1000)
        assert p.approval is not None and (tool == "plain") == (p.approval.consequence is None), p
    return median(took)


async def measure(url: str, name: str, rounds: int, calls: int) -> list[Bar]:
    store = open_store(url)
    workers = WorkerConsequences()
    kinds = {
        "floor": (ApprovalService.from_config(CONFIG, store=store, clock=SystemClock()), "plain"),
        "thread": (
            ApprovalService.from_config(CONFIG, store=store, clock=SystemClock(), consequences=ThreadConsequences()),
            "refund",
        ),
        "worker process": (
            ApprovalService.from_config(CONFIG, store=store, clock=SystemClock(), consequences=workers),
            "refund",
        ),
    }
    try:
        for svc, tool in kinds.values():  # warm: imports, the store's first writes, the worker started
            await proposals(svc, tool, 3)
        spent: dict[str, list[float]] = {k: [] for k in kinds}
        order = list(kinds)
        for r in range(rounds):
            for k in order[r % 3 :] + order[: r % 3]:  # rotated: no kind always runs first
                svc, tool = kinds[k]
                spent[k].append(await proposals(svc, tool, calls))
    finally:
        await workers.aclose()
        await store.close()
    heading(f"consequence cost on {name} ({rounds} interleaved rounds of {calls} proposals of each)")
    row("floor: a proposal without a consequence, ms (median)", f"{median(spent['floor']):.2f}", "(same run)")
    bars = [bar("no consequence (floor)", spent["floor"], floor=True)]
    for k, target in TARGETS_MS.items():
        added = [c - f for c, f in zip(spent[k], spent["floor"], strict=True)]
        lo, hi = median_ci(added)
        shown = f"{median(added):.2f} [{lo:.2f}, {hi:.2f}]"
        row(f"{k}: added per proposal, ms (median [95% CI])", shown, f"<= {target:g} ms", median(added) <= target)
        bars.append(bar(f"with a consequence, {k}", spent[k]))
    return bars


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=40)
    opts = parser.parse_args()
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as d:
        urls = {"SQLite": f"sqlite:///{d}/hitl.db", "Redis": f"{redis_url}?prefix=csq{uuid.uuid4().hex[:6]}"}
        for name, url in urls.items():
            bars = await measure(url, name, opts.rounds, opts.calls)
            chart(f"A proposal with and without a consequence, {name}", "ms", bars)


if __name__ == "__main__":
    with report("consequence", "What a tool's consequence adds before its card is posted"):
        asyncio.run(main())
