"""A flood under Slack's limits: 300 approvals proposed by one agent session, one at a time, into `hitl serve`.

Three settings, interleaved round by round on one machine, each on a fresh SQLite store:

* **floor**: the service alone, no notifier (what recording a proposal costs);
* **Slack unlimited**: `hitl serve`'s service with its Slack side, against the stand-in with its limits off;
* **Slack limited**: the same against the stand-in enforcing Slack's documented limits (one post a second per
  channel after a burst, Tier 3 updates; `hitl.sandbox.rate_limits`).

Measured: each proposal's latency (a proposal must never wait on Slack: limited should match unlimited), and, under
the limits: how long until every one of the 300 is reachable from a Slack message with live buttons (its own card or
a group card it is on; at most 60 s), how many messages that took (at most 30), how long Approve all on the biggest
group card takes to be recorded and shown on the card through a signed click (at most 10 s), how many 429s Slack
answered and how many calls came while a `Retry-After` still ran (must be 0).
Run with `make bench` or `.venv/bin/python bench/flood_bench.py [--approvals N] [--rounds R]`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, row, spread  # noqa: E402
from report import run_reported  # noqa: E402

from hitl.bot.server import app_runner, serve_locally  # noqa: E402
from hitl.bot.settings import BotSettings  # noqa: E402
from hitl.bot.views.group_cards import ACTION_GROUP_APPROVE  # noqa: E402
from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.domain.records import MessageRef  # noqa: E402
from hitl.engine.domain.requests import ProposeRequest  # noqa: E402
from hitl.engine.runtime.compose import compose  # noqa: E402
from hitl.engine.storage.sqlite import SqliteStore  # noqa: E402
from hitl.sandbox.dispatch import Dispatcher  # noqa: E402
from hitl.sandbox.server import start_emulator  # noqa: E402
from hitl.sandbox.webapi import Message, SlackState  # noqa: E402
from hitl.serve import build_server  # noqa: E402

CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"
REACH = 60.0
"""Seconds after the first proposal by which every approval must be reachable from Slack."""
SECRET = "bench-secret"


def live(m: Message) -> bool:
    """A top-level message with buttons: a card or a group card someone can act on."""
    has_buttons = any(b.get("type") == "actions" and b.get("elements") for b in m.blocks)
    return not m.thread_ts and not m.ephemeral_to and has_buttons


async def reachable(store: SqliteStore, state: SlackState, ids: set[str]) -> int:
    """How many of ``ids`` are on a message in Slack that has live buttons."""
    shown = {(m.channel, m.ts) for m in state.messages if live(m)}
    refs = await asyncio.gather(*(store.messages.get(i) for i in ids))
    return sum(1 for ref in refs if ref is not None and (ref.channel, ref.ts) in shown)


async def approve_biggest_group(store: SqliteStore, state: SlackState, slack: Dispatcher) -> tuple[float, int]:
    """Approve all on the biggest one-approver group card, through a signed click: seconds until every member is
    recorded and the card says so, and how many members."""
    refund = state.channel("refund-approvals")
    assert refund is not None
    groups = [m for m in state.messages if live(m) and m.channel == refund.id and " × " in m.text]
    biggest = max(groups, key=lambda m: int(m.text.split(" × ")[0]))
    members = await store.messages.shown_on(MessageRef(channel=biggest.channel, ts=biggest.ts))
    t0 = time.perf_counter()
    await slack.click("U_SUPPORT1", biggest, ACTION_GROUP_APPROVE)
    done = f": {len(members)} approved"
    while time.perf_counter() - t0 < 60:
        card = state.by_ts(biggest.channel, biggest.ts)
        decided = [await store.approvals.get(i) for i in members]
        if card is not None and card.text.endswith(done) and not any(a.is_open for a in decided):
            return time.perf_counter() - t0, len(members)
        await asyncio.sleep(0.05)
    raise AssertionError("the group decision was not shown within 60 s")


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
        slack_signing_secret=SECRET,
        slack_api_url=emulator.api_url,
        hitl_config=str(CONFIG),
        hitl_approval_channel="#refund-approvals",
    )
    rt = await build_server(settings, store=store, clock=SystemClock())
    runner = app_runner(rt.web_app(), shutdown_timeout=1.0)  # what `hitl serve` answers: signed Slack requests
    await runner.setup()
    port = await serve_locally(runner)
    http = aiohttp.ClientSession()
    slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
    try:
        service = rt.runtime.contexts.default.service
        started = time.perf_counter()
        latencies = await propose_all(service, n, f"{setting}{k}")
        pending = {a.id for a in (await store.approvals.list_pending(limit=1000)).items}
        out = {"median": statistics.median(latencies), "total": sum(latencies), "pending": len(pending)}
        if setting == "limited":
            while await reachable(store, state, pending) < len(pending) and time.perf_counter() - started < REACH:
                await asyncio.sleep(0.1)
            out["reach_s"] = time.perf_counter() - started
            out["reached"] = await reachable(store, state, pending)
            out["messages"] = len([m for m in state.messages if not m.ephemeral_to and not m.thread_ts])
            out["group_s"], out["group_n"] = await approve_biggest_group(store, state, slack)
            out["limited"], out["early"] = state.limits.limited, state.limits.early
        return out
    finally:
        await http.close()
        await runner.cleanup()
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
    reached = min(r["reached"] / max(r["pending"], 1) for r in runs)
    row(
        f"limited: reachable from a live message by {REACH:.0f} s",
        spread([r["reached"] / max(r["pending"], 1) * 100 for r in runs], "{:.0f}%"),
        "100%",
        reached == 1.0,
    )
    row("limited: seconds until every one was reachable", spread([r["reach_s"] for r in runs], "{:.1f}"), "<= 60")
    most = max(r["messages"] for r in runs)
    row("limited: messages posted", spread([r["messages"] for r in runs], "{:.0f}"), "<= 30", most <= 30)
    slowest = max(r["group_s"] for r in runs)
    row(
        "limited: Approve all on the biggest group, recorded and shown, s",
        spread([r["group_s"] for r in runs], "{:.2f}"),
        "<= 10",
        slowest <= 10,
    )
    row("limited: members of that group", spread([r["group_n"] for r in runs], "{:.0f}"))
    row("limited: 429s answered", spread([r["limited"] for r in runs], "{:.0f}"))
    early = max(r["early"] for r in runs)
    row("limited: calls made while a Retry-After ran", f"{early:.0f}", "0", early == 0)
    row("before grouping (previous release): reachable by 60 s / messages", "21% / 62")
    row("peer (before this work): 300 proposals under the limits", "62.8 s")


if __name__ == "__main__":
    run_reported(
        "flood", "A flood under Slack's limits: proposals never wait on Slack", __doc__, main, approvals=300, rounds=3
    )
