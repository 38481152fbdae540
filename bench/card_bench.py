"""Card latency: how long after another process creates an approval a running `hitl serve` posts its card, per store.

`hitl serve` runs as a real process against the Slack emulator on 127.0.0.1 with the default sweep interval (5 s);
this process creates approvals one at a time, as an agent process would, and times each until its card reaches the
emulator. The emulator enforces Slack's limits, so approvals come one every 1.1 s (Slack's sustained pace for one
channel); a faster flood is flood_bench's. Stores alternate round by round. Target: median <= 250 ms. The named
peer is the sweep alone, which is what carded these before the store announced new approvals (5.5 s median). Run
with `make bench` or `.venv/bin/python bench/card_bench.py [--cards N]`.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, median, redis_server, row, spread, start_serve, stop_process  # noqa: E402
from report import run_reported  # noqa: E402

from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.config.hitl_yaml import load_config  # noqa: E402
from hitl.engine.domain.requests import ProposeRequest  # noqa: E402
from hitl.engine.service import ApprovalService  # noqa: E402
from hitl.engine.storage import open_store  # noqa: E402
from hitl.sandbox.server import start_emulator  # noqa: E402
from hitl.sandbox.webapi import SlackState  # noqa: E402

CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def one_card(svc: ApprovalService, state: SlackState, i: int) -> float:
    p = await svc.propose(
        ProposeRequest(
            "refund", {"order_id": str(i), "customer_id": f"C-{uuid.uuid4().hex[:6]}", "amount": 40}, session_id=f"b{i}"
        )
    )
    assert p.approval is not None
    t0 = time.perf_counter()
    while not any(p.approval.id in m.text for m in state.messages if not m.thread_ts):
        if time.perf_counter() - t0 > 30:
            raise SystemExit(f"no card for {p.approval.id} after 30 s")
        await asyncio.sleep(0.002)
    return (time.perf_counter() - t0) * 1000


async def main(cards: int) -> None:
    results: dict[str, list[float]] = {"sqlite": [], "redis": []}
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as d:
        work = Path(d)
        urls = {"sqlite": f"sqlite:///{work}/hitl.db", "redis": f"{redis_url}?prefix=cb"}
        states, procs, services, emulators = {}, [], {}, []
        for name, url in urls.items():
            state = SlackState()
            state.add_channel("refund-approvals")
            emulator = await start_emulator(state)
            emulators.append(emulator)
            proc, _ = await start_serve(url, state.token, emulator.api_url, work)
            procs.append(proc)
            states[name] = state
            services[name] = ApprovalService.from_config(
                load_config(CONFIG), store=open_store(url), clock=SystemClock()
            )
        await asyncio.sleep(1.0)  # past each server's first sweep
        try:
            for i in range(cards):  # alternate: both stores meet the same machine
                began = time.perf_counter()
                for name in results:
                    results[name].append(await one_card(services[name], states[name], i))
                await asyncio.sleep(max(0.0, 1.1 - (time.perf_counter() - began)))  # Slack's pace per channel
        finally:
            await asyncio.gather(*(stop_process(proc, timeout=10) for proc in procs))
            for svc in services.values():
                await svc.store.close()
            for emulator in emulators:
                await emulator.close()
    heading(f"card latency: approval created by another process -> card posted by hitl serve ({cards} cards per store)")
    for name, ms in results.items():
        row(f"{name}: ms, min / median / max", spread(ms, "{:.0f}"), "median <= 250", median(ms) <= 250)
    row("peer: the sweep alone (before), median", "5,500 ms")


if __name__ == "__main__":
    run_reported(
        "card", "Card latency: an approval made in another process to its card in Slack", __doc__, main, cards=30
    )
