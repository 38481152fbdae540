"""Signed button clicks through the whole stack: the emulator (Slack) -> `hitl serve` (a real process,
Redis store) -> decide -> chat.update. Also: decision -> waiting SlackAsk wake-up, and Slack calls per decision.

HumanLayer, the named peer, is a hosted service that cannot run offline; its documented poll interval (3 s)
is printed as the reference for the wake-up figure.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import (  # noqa: E402
    cpu_seconds,
    free_port,
    heading,
    median,
    pct,
    redis_server,
    row,
    serve_env,
    spread,
    stop_process,
)
from report import report  # noqa: E402

from hitl.adapters.ask_callback import SlackAsk  # noqa: E402
from hitl.bot.views.blocks import card, card_text  # noqa: E402
from hitl.bot.views.controls import ACTION_APPROVE  # noqa: E402
from hitl.engine.agents.ask import Approvals  # noqa: E402
from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.domain.records import MessageRef  # noqa: E402
from hitl.engine.domain.requests import ProposeRequest  # noqa: E402
from hitl.engine.runtime.compose import compose  # noqa: E402
from hitl.engine.storage.redis import RedisStore, connect  # noqa: E402
from hitl.sandbox.dispatch import Dispatcher  # noqa: E402
from hitl.sandbox.server import start_emulator  # noqa: E402
from hitl.sandbox.webapi import Message, SlackState  # noqa: E402

SECRET = "bench-secret"
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=2000, help="clicks at -c concurrent, over all rounds (one decision each)")
    ap.add_argument("-c", type=int, default=200, help="concurrent clicks under load")
    ap.add_argument("--light", type=int, default=2000, help="clicks at 10 concurrent, over all rounds")
    ap.add_argument("--alone", type=int, default=500, help="clicks one at a time, over all rounds")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", default="", help="write the serve process's cProfile output to this file")
    ap.add_argument("--wakeups", type=int, default=200)
    a = ap.parse_args()
    # hitl's own CPU per click, card update included: thousands of updates would take Slack's Tier 3 (50 a minute)
    # most of an hour, so the stand-in's limits are off here; what Slack's pace does is flood_bench's to measure.
    state = SlackState(rate_limited=False)
    channel = state.add_channel("refund-approvals")
    state.users["U_SUPPORT1"] = {"name": "support1"}
    emulator = await start_emulator(state)
    with redis_server() as url:
        port = free_port()
        env = {
            **serve_env(f"{url}?prefix=bench", state.token, emulator.api_url, secret=SECRET),
            "SWEEP_INTERVAL": "3600",
        }
        # --profile: the serve process runs under cProfile and writes its profile when interrupted at the end.
        profiled = ["-m", "cProfile", "-o", a.profile] if a.profile else []
        serve = subprocess.Popen(
            [sys.executable, *profiled, "-m", "hitl", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        floor_port = free_port()
        floor = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "slack_floor.py"), str(floor_port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        store = RedisStore(connect(url, max_connections=256), prefix="bench")
        svc = compose(store=store, clock=SystemClock(), config_path=str(CONFIG)).service
        http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=a.c + 10))
        try:
            for each in (port, floor_port):
                for _ in range(400):
                    try:
                        async with http.get(f"http://127.0.0.1:{each}/healthz") as r:
                            if r.status == 200:
                                break
                    except aiohttp.ClientError:
                        await asyncio.sleep(0.05)
            slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
            bare = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{floor_port}/slack/events", signing_secret=SECRET)

            async def cards(n: int, tag: str) -> list[tuple[str, Message]]:
                """Approvals made here (another process, as an agent would), each with a card this bench posted and
                recorded as the approval's card. `hitl serve` hears of each new approval and may post one of its own
                (then its updates go to that one); either way each decision updates one card."""
                out = []
                for i in range(n):
                    args = {"order_id": f"{tag}{i}", "customer_id": f"C{i}", "amount": 10}
                    p = await svc.propose(ProposeRequest("refund", args, session_id=f"{tag}{i}"))
                    assert p.approval is not None
                    msg = Message(
                        ts=state.new_ts(),
                        channel=channel.id,
                        user=state.bot_user,
                        text=card_text(p.approval),
                        blocks=card(p.approval, now=time.time(), view=svc.present(p.approval)),
                    )
                    state.messages.append(msg)
                    await store.messages.set(p.approval.id, MessageRef(channel=msg.channel, ts=msg.ts))
                    out.append((p.approval.id, msg))
                return out

            def bare_cards(n: int, blocks: list[dict[str, Any]]) -> list[tuple[str, Message]]:
                """Cards for the bare app: copies of a real card's blocks, no approval behind them (the bare app
                records nothing); each text ends with its own name, as a hitl card's ends with its approval's id."""
                out = []
                for i in range(n):
                    name = f"bare{i}"
                    msg = Message(
                        ts=state.new_ts(), channel=channel.id, user=state.bot_user, text=f"({name})", blocks=blocks
                    )
                    state.messages.append(msg)
                    out.append((name, msg))
                return out

            def updated(shown: list[tuple[str, Message]]) -> int:
                """chat.update calls on the cards of these approvals (each card's text ends with its id)."""
                ids = {aid for aid, _ in shown}
                texts = (str(c.args.get("text", "")) for c in state.calls_to("chat.update"))
                return sum(1 for t in texts if t.rsplit("(", 1)[-1].rstrip(")") in ids)

            async def settled() -> None:
                """Until `hitl serve` has posted the cards it posts of its own (so none of that lands in a burst)."""
                seen = -1
                while seen != len(state.calls_to("chat.postMessage")):
                    seen = len(state.calls_to("chat.postMessage"))
                    await asyncio.sleep(0.5)

            async def burst(shown: list[tuple[str, Message]], concurrency: int, *, bare_app: bool = False) -> Burst:
                """Click every card, ``concurrency`` at a time; until every decision is recorded and every card
                updated. The serve process's CPU over that span, per click, includes its chat.update work. With
                ``bare_app``, the clicks go to the floor app instead (no decision is recorded there)."""
                sem = asyncio.Semaphore(concurrency)
                acks: list[float] = []
                before = updated(shown)
                target, via = (floor, bare) if bare_app else (serve, slack)
                cpu0 = cpu_seconds(target.pid)

                async def click(msg: Message) -> None:
                    async with sem:
                        t0 = time.perf_counter()
                        reply = await via.click("U_SUPPORT1", msg, ACTION_APPROVE)
                        acks.append((time.perf_counter() - t0) * 1000)
                        assert reply.status == 200

                msgs = [m for _, m in shown]
                t0, wall0 = time.perf_counter(), time.time()
                await asyncio.gather(*(click(m) for m in msgs))
                acked = time.perf_counter() - t0
                while updated(shown) - before < len(msgs):  # the serve's work is done
                    await asyncio.sleep(0.002)
                cpu = (cpu_seconds(target.pid) - cpu0) / len(msgs)
                if bare_app:
                    return Burst(acks, len(msgs) / acked, 0.0, cpu)
                # When the last decision was recorded, by the store's own timestamps (no polling in the window).
                last = max([(await store.approvals.get(aid)).decisions[-1].at for aid, _ in shown])
                return Burst(acks, len(msgs) / acked, len(msgs) / (last - wall0), cpu)

            warm = await cards(50, "warm")
            pending_card = copy.deepcopy(warm[0][1].blocks)  # its buttons, before a click replaces them
            await settled()
            await burst(warm, 10)
            heavy_cards = await cards(a.n, "heavy")
            light_cards = await cards(a.light, "light")
            alone_cards = await cards(a.alone, "alone")
            floor_cards = bare_cards(a.light, pending_card)
            await settled()
            per = a.n // a.rounds
            light_per = a.light // a.rounds
            heavy: list[Burst] = []
            light: list[Burst] = []
            alone: list[Burst] = []
            bare_light: list[Burst] = []
            alone_per = a.alone // a.rounds
            for rnd in range(a.rounds):  # interleaved: each round one loaded burst, then one at 10 concurrent
                heavy.append(await burst(heavy_cards[rnd * per : (rnd + 1) * per], a.c))
                light.append(await burst(light_cards[rnd * light_per : (rnd + 1) * light_per], 10))
                bare_light.append(await burst(floor_cards[rnd * light_per : (rnd + 1) * light_per], 10, bare_app=True))
                alone.append(await burst(alone_cards[rnd * alone_per : (rnd + 1) * alone_per], 1))
            await asyncio.sleep(0.5)
            clicked = [*warm, *heavy_cards, *light_cards, *alone_cards]
            clicks = (per + light_per + alone_per) * a.rounds + len(warm)
            updates = updated(clicked)

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
                    blocks=card(current, now=time.time(), view=svc.present(current)),
                )
                await slack.click("U_SUPPORT1", msg, ACTION_APPROVE)
                answer, woke = await task
                decided_at = (await store.approvals.get(aid)).decisions[-1].at
                assert answer == "y"
                wake.append((woke - decided_at) * 1000)
        finally:
            await http.close()
            await stop_process(serve, sig=signal.SIGINT, timeout=20)  # SIGINT: a --profile run writes its profile
            await stop_process(floor)
            await store.close()
            await emulator.close()
    heading(
        f"hitl Slack benchmark: {a.rounds} interleaved rounds of {per} signed clicks at {a.c} concurrent and "
        f"{light_per} at 10 concurrent and {alone_per} one at a time, one `hitl serve` process, Redis store "
        f"({os.cpu_count()} cores); figures are min / median / max over the rounds"
    )
    row("figure", "measured", "target")
    cpu_light = [b.cpu_ms for b in light]
    row("serve CPU per click (10 concurrent), ms", spread(cpu_light, "{:.2f}"), "<= 0.9 ms", median(cpu_light) <= 0.9)
    cpu_bare = [b.cpu_ms for b in bare_light]
    row(
        "  floor: a bare Bolt app's CPU per click, its ack and chat.update only (10 concurrent), ms",
        spread(cpu_bare, "{:.2f}"),
        "(same run)",
    )
    row("  serve CPU per click minus the floor's (medians), ms", f"{median(cpu_light) - median(cpu_bare):.2f}", "")
    row("  serve CPU per click (200 concurrent), ms", spread([b.cpu_ms for b in heavy], "{:.2f}"), "")
    ack50 = [median(b.acks) for b in alone]
    row("click ack p50, unloaded (one click at a time), ms", spread(ack50), "<= 4 ms", median(ack50) <= 4)
    row("  ack p50 (10 concurrent), ms", spread([median(b.acks) for b in light]), "")
    row("  ack p99 (10 concurrent), ms", spread([pct(b.acks, 0.99) for b in light]), "")
    rate10 = [b.decided_per_s for b in light]
    row("decisions/s, one process, 10 concurrent", spread(rate10, "{:,.0f}"), ">= 1,000 /s", median(rate10) >= 1000)
    rate = [b.decided_per_s for b in heavy]
    row(f"decisions/s, one process, {a.c} concurrent", spread(rate, "{:,.0f}"), ">= 500 /s", median(rate) >= 500)
    row("  acks/s", spread([b.acked_per_s for b in heavy], "{:,.0f}"), "")
    p99 = [pct(b.acks, 0.99) for b in heavy]
    row(f"click ack p99 ({a.c} concurrent), ms", spread(p99), "<= 50 ms", median(p99) <= 50)
    row(
        "  Little's law: concurrency / acks per second",
        f"{a.c / median([b.acked_per_s for b in heavy]) * 1000:.0f} ms",
        "",
    )
    row("decision -> waiting SlackAsk wake-up p50", f"{median(wake):.2f} ms", "<= 5 ms", median(wake) <= 5)
    row("  wake-up p99", f"{pct(wake, 0.99):.2f} ms", "")
    row("  HumanLayer (reference: documented poll interval)", "3000 ms", "")
    row("Slack calls per decision (chat.update)", f"{updates / clicks:.2f}", "== 1", abs(updates / clicks - 1) < 0.01)


@dataclass
class Burst:
    acks: list[float]
    """Each click's ack latency, ms."""
    acked_per_s: float
    decided_per_s: float
    """Decisions recorded per second, from the first click to the last decision."""
    cpu_s: float

    @property
    def cpu_ms(self) -> float:
        return self.cpu_s * 1000


if __name__ == "__main__":
    with report("slack", "Slack clicks through hitl serve"):
        asyncio.run(main())
