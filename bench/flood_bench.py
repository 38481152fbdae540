"""A flood under Slack's limits: 300 approvals proposed by one agent session, one at a time, into `hitl serve`.

Three settings, interleaved round by round on one machine, each on a fresh SQLite store:

* **floor**: the service alone, no notifier (what recording a proposal costs);
* **Slack unlimited**: `hitl serve`'s service with its Slack side, against the stand-in with its limits off;
* **Slack limited**: the same against the stand-in enforcing Slack's documented limits (one post a second per
  channel after a burst, Tier 3 updates; `hitl.sandbox.rate_limits`).

Measured: each proposal's latency (a proposal must never wait on Slack: limited should match unlimited), and, under
the limits, how many of the 300 are reachable from a card with live buttons 60 s after the first proposal, how many
messages that took, how many 429s Slack answered and how many calls came while a `Retry-After` still ran (must be 0).
Run with `make bench` or `.venv/bin/python bench/flood_bench.py [--approvals N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, row, spread  # noqa: E402
from report import report  # noqa: E402

from hitl.bot.settings import BotSettings  # noqa: E402
from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.domain.requests import ProposeRequest  # noqa: E402
from hitl.engine.runtime.compose import compose  # noqa: E402
from hitl.engine.storage.sqlite import SqliteStore  # noqa: E402
from hitl.sandbox.server import start_emulator  # noqa: E402
from hitl.sandbox.webapi import SlackState  # noqa: E402
from hitl.serve import build_server  # noqa: E402

CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"
REACH = 60.0
"""Seconds after the first proposal at which reachability is counted."""


async def propose_all(service: Any, n: int, session: str) -> list[float]:
    """``n`` proposals from one session, one at a time; each one's latency in ms."""
    latencies = []
    for i in range(n):
        args = {"order_id": f"{session}-{i}", "customer_id": f"C-{i}", "amount": 5 + i % 40}
        t0 = time.perf_counter()
        p = await service.propose(ProposeRequest("refund", args, session_id=session))
        latencies.append((time.perf_counter() - t0) * 1000)
        assert p.approval is not None or p.may_run
    return latencies


async def one_round(setting: str, n: int, work: Path, k: int) -> dict[str, float]:
    store = SqliteStore(work / f"{setting}-{k}.db")
    if setting == "floor":
        service = compose(store=store, clock=SystemClock(), config_path=str(CONFIG)).service
        latencies = await propose_all(service, n, f"floor{k}")
        await store.close()
        return {"median": statistics.median(latencies), "total": sum(latencies)}
    state = SlackState(rate_limited=setting == "limited")
    for name in ("refund-approvals", "finance-approvals", "general"):
        state.add_channel(name)
    emulator = await start_emulator(state)
    settings = BotSettings(
        slack_bot_token=state.token,
        slack_signing_secret="bench-secret",
        slack_api_url=emulator.api_url,
        hitl_config=str(CONFIG),
        hitl_approval_channel="#refund-approvals",
    )
    rt = await build_server(settings, store=store, clock=SystemClock())
    try:
        service = rt.runtime.contexts.default.service
        started = time.perf_counter()
        latencies = await propose_all(service, n, f"{setting}{k}")
        pending = {a.id for a in (await store.approvals.list_pending(limit=1000)).items}
        reached = 0.0
        if setting == "limited":
            await asyncio.sleep(max(0.0, started + REACH - time.perf_counter()))
            carded = {m.text.split("(")[-1].rstrip(")") for m in state.messages if not m.thread_ts}
            reached = len(pending & carded)
        return {
            "median": statistics.median(latencies),
            "total": sum(latencies),
            "reached": reached,
            "pending": len(pending),
            "messages": len([m for m in state.messages if not m.ephemeral_to]),
            "limited": state.limits.limited,
            "early": state.limits.early,
        }
    finally:
        await rt.close()
        await emulator.close()


async def main(n: int, rounds: int) -> None:
    settings = ("floor", "unlimited", "limited")
    results: dict[str, list[dict[str, float]]] = {s: [] for s in settings}
    with tempfile.TemporaryDirectory() as d:
        for k in range(rounds):  # interleaved: every setting meets the same machine
            for setting in settings:
                results[setting].append(await one_round(setting, n, Path(d), k))
    heading(f"a flood: {n} approvals from one agent session, one at a time ({rounds} rounds, min / median / max)")
    for setting in settings:
        runs = results[setting]
        row(f"{setting}: proposal ms, median", spread([r["median"] for r in runs], "{:.2f}"))
        row(f"{setting}: all {n} proposals, s", spread([r["total"] / 1000 for r in runs], "{:.2f}"))
    floor = statistics.median(r["total"] for r in results["unlimited"])
    limited = statistics.median(r["total"] for r in results["limited"])
    row("limited / unlimited, all proposals", f"{limited / floor:.2f}x", "<= 1.5x", limited / floor <= 1.5)
    runs = results["limited"]
    row(
        f"limited: reachable from a card after {REACH:.0f} s",
        spread([r["reached"] / max(r["pending"], 1) * 100 for r in runs], "{:.0f}%"),
        "100% (grouping: not yet)",
        False,
    )
    row("limited: messages posted", spread([r["messages"] for r in runs], "{:.0f}"), "<= 30 (grouping)")
    row("limited: 429s answered", spread([r["limited"] for r in runs], "{:.0f}"))
    early = max(r["early"] for r in runs)
    row("limited: calls made while a Retry-After ran", f"{early:.0f}", "0", early == 0)
    row("peer (before this work): 300 proposals under the limits", "62.8 s")


if __name__ == "__main__":
    with report("flood", "A flood under Slack's limits: proposals never wait on Slack"):
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--approvals", type=int, default=300)
        parser.add_argument("--rounds", type=int, default=3)
        args = parser.parse_args()
        asyncio.run(main(args.approvals, args.rounds))
