"""Signed button clicks through the whole stack: the emulator (Slack) -> `hitl serve` (a real process,
Redis store) -> decide -> chat.update. Also: decision -> waiting SlackAsk wake-up, and Slack calls per decision.

HumanLayer, the named peer, is a hosted service that cannot run offline; its documented poll interval (3 s)
is printed as the reference for the wake-up figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import free_port, median, pct, redis_server, row  # noqa: E402

from bot.blocks import ACTION_APPROVE, card, card_text  # noqa: E402
from engine.ask import Approvals  # noqa: E402
from engine.clock import SystemClock  # noqa: E402
from engine.compose import compose  # noqa: E402
from engine.domain.models import Status  # noqa: E402
from engine.domain.records import MessageRef  # noqa: E402
from engine.storage.redis import RedisStore, connect  # noqa: E402
from hitl.adapters.ask_callback import SlackAsk  # noqa: E402
from slack_sandbox.dispatch import Dispatcher  # noqa: E402
from slack_sandbox.server import start_emulator  # noqa: E402
from slack_sandbox.webapi import Message, SlackState  # noqa: E402

SECRET = "bench-secret"
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=2000, help="clicks (one decision each)")
    ap.add_argument("-c", type=int, default=200, help="concurrent clicks")
    ap.add_argument("--wakeups", type=int, default=200)
    a = ap.parse_args()
    state = SlackState()
    channel = state.add_channel("refund-approvals")
    state.users["U_SUPPORT1"] = {"name": "support1"}
    emulator = await start_emulator(state)
    with redis_server() as url:
        port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SLACK_BOT_TOKEN": state.token,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": emulator.api_url,
            "HITL_STORE": f"{url}?prefix=bench",
            "HITL_CONFIG": str(CONFIG),
            "HITL_APPROVAL_CHANNEL": "#refund-approvals",
            "SWEEP_INTERVAL": "3600",
        }
        serve = subprocess.Popen(
            [sys.executable, "-m", "hitl", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        store = RedisStore(connect(url, max_connections=256), prefix="bench")
        svc = compose(store=store, clock=SystemClock(), config_path=str(CONFIG)).service
        http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=a.c + 10))
        try:
            for _ in range(400):
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)
            slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
            cards = []
            for i in range(a.n + 50):
                p = await svc.propose(
                    "refund", {"order_id": str(i), "customer_id": f"C{i}", "amount": 10}, session_id=f"bench-{i}"
                )
                assert p.approval is not None
                msg = Message(
                    ts=state.new_ts(),
                    channel=channel.id,
                    user=state.bot_user,
                    text=card_text(p.approval),
                    blocks=card(p.approval, now=time.time()),
                )
                state.messages.append(msg)
                await store.messages.set(p.approval.id, MessageRef(channel=msg.channel, ts=msg.ts))
                cards.append((p.approval.id, msg))
            for _, msg in cards[:50]:  # warm-up
                await slack.click("U_SUPPORT1", msg, ACTION_APPROVE)
            state.calls.clear()
            sem = asyncio.Semaphore(a.c)
            acks: list[float] = []

            async def click(msg: Message) -> None:
                async with sem:
                    t0 = time.perf_counter()
                    reply = await slack.click("U_SUPPORT1", msg, ACTION_APPROVE)
                    acks.append((time.perf_counter() - t0) * 1000)
                    assert reply.status == 200

            t0 = time.perf_counter()
            await asyncio.gather(*(click(msg) for _, msg in cards[50:]))
            ack_elapsed = time.perf_counter() - t0
            ids = [aid for aid, _ in cards[50:]]
            while True:
                decided = sum(
                    1
                    for x in await asyncio.gather(*(store.approvals.get(i) for i in ids))
                    if x.status is Status.APPROVED
                )
                if decided == len(ids):
                    break
                await asyncio.sleep(0.01)
            elapsed = time.perf_counter() - t0
            for _ in range(1200):  # card updates trail the decisions (one worker, like Slack's rate limits want)
                if len(state.calls_to("chat.update")) >= len(ids):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            updates = len(state.calls_to("chat.update"))

            # The same clicks at low concurrency: the ack latency of an unloaded bot.
            light: list[float] = []
            extra = []
            for i in range(200):
                p = await svc.propose(
                    "refund", {"order_id": f"l{i}", "customer_id": "L", "amount": 3}, session_id=f"light-{i}"
                )
                assert p.approval is not None
                extra.append(
                    Message(
                        ts=state.new_ts(),
                        channel=channel.id,
                        user=state.bot_user,
                        text="",
                        blocks=card(p.approval, now=time.time()),
                    )
                )
            light_sem = asyncio.Semaphore(10)

            async def light_click(msg: Message) -> None:
                async with light_sem:
                    t1 = time.perf_counter()
                    await slack.click("U_SUPPORT1", msg, ACTION_APPROVE)
                    light.append((time.perf_counter() - t1) * 1000)

            await asyncio.gather(*(light_click(m) for m in extra))

            wake: list[float] = []
            asker = SlackAsk(
                Approvals(svc),
                session="wake",
            )

            async def timed_ask(args: dict[str, object]) -> tuple[str, float]:
                answer = await asker(f'Approve "refund"?\n  Input: {json.dumps(args)}')  # Strands' prompt
                return answer, time.time()  # the moment the waiting agent has its answer

            for i in range(a.wakeups):
                args: dict[str, object] = {"order_id": f"w{i}", "customer_id": f"W{i}", "amount": 5}
                task = asyncio.create_task(timed_ask(args))
                aid = ""
                while not aid:  # the asker's request appears in the store
                    found = (await store.approvals.list_pending(limit=500)).items
                    aid = next((x.id for x in found if x.args.get("order_id") == f"w{i}"), "")
                    await asyncio.sleep(0.002)
                await asyncio.sleep(0.01)  # the asker is now waiting on pub/sub
                current = await store.approvals.get(aid)
                msg = Message(
                    ts=state.new_ts(),
                    channel=channel.id,
                    user=state.bot_user,
                    text="",
                    blocks=card(current, now=time.time()),
                )
                await slack.click("U_SUPPORT1", msg, ACTION_APPROVE)
                answer, woke = await task
                decided_at = (await store.approvals.get(aid)).decisions[-1].at
                assert answer == "y"
                wake.append((woke - decided_at) * 1000)
        finally:
            await http.close()
            serve.terminate()
            serve.wait(timeout=20)
            await store.close()
            await emulator.close()
    print(
        f"hitl Slack benchmark: {a.n} signed clicks, {a.c} concurrent, one `hitl serve` process, Redis store "
        f"({os.cpu_count()} cores)"
    )
    row("figure", "measured", "target")
    row(f"click ack latency p50 ({a.c} concurrent)", f"{median(acks):.1f} ms", "")
    row(f"click ack latency p99 ({a.c} concurrent)", f"{pct(acks, 0.99):.1f} ms", "<= 50 ms", pct(acks, 0.99) <= 50)
    row("  Little's law: concurrency / throughput", f"{a.c / (len(ids) / ack_elapsed) * 1000:.0f} ms", "")
    row("click ack latency p50 / p99 (10 concurrent)", f"{median(light):.1f} / {pct(light, 0.99):.1f} ms", "")
    row("decisions per second (all recorded)", f"{len(ids) / elapsed:,.0f} /s", ">= 500 /s", len(ids) / elapsed >= 500)
    row("  (acks per second)", f"{len(ids) / ack_elapsed:,.0f} /s", "")
    row("decision -> waiting SlackAsk wake-up p50", f"{median(wake):.2f} ms", "<= 5 ms", median(wake) <= 5)
    row("  wake-up p99", f"{pct(wake, 0.99):.2f} ms", "")
    row("  HumanLayer (reference: documented poll interval)", "3000 ms", "")
    row(
        "Slack calls per decision (chat.update)",
        f"{updates / len(ids):.2f}",
        "== 1",
        abs(updates / len(ids) - 1) < 0.01,
    )


if __name__ == "__main__":
    asyncio.run(main())
