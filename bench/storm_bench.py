"""Decision storm: thousands of signed Slack requests (Approve and Trust clicks, `/hitl approve` and `/hitl reject`
commands, several people at once on each approval) against `hitl serve` replicas, each answered only once its
decision is recorded or refused. Measures how fast every answer comes (Slack allows 3 s) and checks the outcome:
each approval decided exactly once, every answer a 200.

Redis runs two replicas behind the requests (they alternate), SQLite one. Target: p99 under 1 s, max under 3 s.
Run with `make bench` or `.venv/bin/python bench/storm_bench.py [--approvals N] [--concurrency C]`.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, pct, redis_server, row, start_serve, stop_process  # noqa: E402
from report import run_reported  # noqa: E402

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_TRUST  # noqa: E402
from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.config.hitl_yaml import load_config  # noqa: E402
from hitl.engine.domain.models import Approval, Status  # noqa: E402
from hitl.engine.domain.requests import ProposeRequest  # noqa: E402
from hitl.engine.service import ApprovalService  # noqa: E402
from hitl.engine.storage import open_store  # noqa: E402
from hitl.sandbox.dispatch import Dispatcher  # noqa: E402
from hitl.sandbox.server import start_emulator  # noqa: E402
from hitl.sandbox.webapi import Message, SlackState  # noqa: E402

SECRET = "bench-secret"
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"
REVIEWERS = ["U_SUPPORT1", "U_SUPPORT2"]


def buttons(a: Approval) -> Message:
    value = f"{a.id}|{a.version}|{a.action_hash}"
    elements = [
        {"type": "button", "action_id": k, "text": {"type": "plain_text", "text": k}, "value": value}
        for k in (ACTION_APPROVE, ACTION_TRUST)
    ]
    return Message(
        ts="1.0",
        channel="C0",
        user="B0",
        text=a.id,
        blocks=[{"type": "actions", "block_id": "b", "elements": elements}],
    )


async def storm(url: str, replicas: int, approvals: int, concurrency: int, seed: int) -> None:
    state = SlackState()
    state.add_channel("refund-approvals")
    emulator = await start_emulator(state)
    rng = random.Random(seed)
    stopped: list[bool] = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        store = open_store(url)
        svc = ApprovalService.from_config(load_config(CONFIG), store=store, clock=SystemClock())
        made: list[Approval] = []
        for i in range(approvals):
            p = await svc.propose(
                ProposeRequest(
                    "refund", {"order_id": str(i), "customer_id": f"C-{i}", "amount": 50}, session_id=f"storm-{i}"
                )
            )
            assert p.approval is not None
            made.append(p.approval)
        servers = [await start_serve(url, state.token, emulator.api_url, work, secret=SECRET) for _ in range(replicas)]
        http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
        slacks = [
            Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
            for _, port in servers
        ]
        requests = []
        for a in made:  # several people on each approval, in several ways
            for _ in range(rng.choice((2, 3, 4, 5))):
                requests.append(
                    (a, rng.choice(("approve", "trust", "cmd_approve", "cmd_reject")), rng.choice(REVIEWERS))
                )
        rng.shuffle(requests)
        latencies: list[float] = []
        statuses: list[int] = []
        gate = asyncio.Semaphore(concurrency)

        async def one(n: int, a: Approval, how: str, who: str) -> None:
            slack = slacks[n % len(slacks)]
            async with gate:
                t0 = time.perf_counter()
                if how in ("approve", "trust"):
                    reply = await slack.click(who, buttons(a), ACTION_APPROVE if how == "approve" else ACTION_TRUST)
                elif how == "cmd_approve":
                    reply = await slack.command(who, "refund-approvals", f"approve {a.id}")
                else:
                    reply = await slack.command(who, "refund-approvals", f"reject {a.id} storm")
                latencies.append(time.perf_counter() - t0)
                statuses.append(reply.status)

        started = time.perf_counter()
        try:
            await asyncio.gather(*(one(n, a, how, who) for n, (a, how, who) in enumerate(requests)))
            wall = time.perf_counter() - started
            decided = [await store.approvals.get(a.id) for a in made]
            trails = [await store.audit.entries(approval_id=a.id) for a in made]
        finally:
            await http.close()
            # A replica that does not stop is killed and reported below: the other figures still stand.
            stopped += await asyncio.gather(*(stop_process(proc) for proc, _ in servers))
            await store.close()
            await emulator.close()
    once = sum(1 for t in trails if sum(e.event == "decided" for e in t) == 1)
    final = sum(1 for a in decided if a.status in (Status.APPROVED, Status.REJECTED))
    name = f"{url.split(':', 1)[0]}, {replicas} replica{'s' if replicas > 1 else ''}"
    heading(f"{name}: {len(requests):,} requests on {approvals:,} approvals, {concurrency} in flight, {wall:.1f} s")
    ms = [x * 1000 for x in latencies]
    row("answer p50 / p99 / max (ms)", f"{pct(ms, 0.5):.0f} / {pct(ms, 0.99):.0f} / {max(ms):.0f}", "p99 < 1000")
    row("answers within Slack's 3 s", f"{sum(x < 3000 for x in ms):,} of {len(ms):,}", "all", all(x < 3000 for x in ms))
    row("answered 200", f"{statuses.count(200):,} of {len(statuses):,}", "all", statuses.count(200) == len(statuses))
    row("approvals decided, each exactly once", f"{once:,} of {approvals:,}", "all", once == final == approvals)
    row("p99 under 1 s", f"{pct(ms, 0.99):.0f} ms", "< 1000 ms", pct(ms, 0.99) < 1000)
    row(
        "replicas that stopped within 15 s of SIGTERM",
        f"{sum(stopped)} of {len(stopped)}",
        "all",
        all(stopped),
    )


async def main(approvals: int, concurrency: int) -> None:
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as d:
        await storm(f"{redis_url}?prefix=storm{uuid.uuid4().hex[:6]}", 2, approvals, concurrency, seed=1)
        await storm(f"sqlite:///{d}/storm.db", 1, approvals, concurrency, seed=2)


if __name__ == "__main__":
    run_reported("storm", "An approval storm through hitl serve", __doc__, main, approvals=1000, concurrency=100)
