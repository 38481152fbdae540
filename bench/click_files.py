"""How many of our files a Slack Approve runs code in: one real, signed Approve click on the pending approval of a
workflow run (the refund example, paused on its ``refund`` step), and every distinct source file of the tree under
``engine/``, ``bot/`` and ``hitl/`` whose code ran

  (a) from the click's request entering the app (aiohttp starts handling the POST to ``/slack/events``) until its
      HTTP answer, the ack, is written (aiohttp logs the finished request), and
  (b) from the same moment until the run's effect runs (the approved step's tool, ``tools:refund``, is called).

It runs as tests/bot/conftest.py's harness does: ``hitl serve``'s parts (``build_server``, its web app on
127.0.0.1), the emulated Slack Web API and the click's sender share one process and one event loop, on a fresh
SQLite store, with the background loop started as ``hitl serve`` starts it. Both windows count code whichever task
or thread runs it (the decision's task, the card workers, the store's thread, the tools' threads). The background
loop is paused from just before the click until its answer is back, so (a) never counts a resume that happened to
interleave with the answer; started again, it resumes the run at once, as the decision's wake would have. Not
counted: the stand-in for Slack (``hitl/sandbox/``, Slack's code in production), the example's own tools (the
user's; ``examples/refund`` links to ``hitl/demo/refund``), and code run in another process (a consequence
worker). Files are found by ``sys.setprofile`` (and ``threading.setprofile`` for threads started after it): each
Python frame entered or resumed (a ``call`` event; C calls are not frames) names its code's file, resolved through
the ``hitl/engine`` and ``hitl/bot`` links to the repository's own paths. One click runs untraced first, so what
runs once per process (lazy imports, caches filled) is not counted as a click's; each traced click is on a run of
its own, and a figure that differs between them (a cached read expiring, card work racing the answer) is given
as its range.

The tree measured is the one ``hitl`` is imported from (``PYTHONPATH``), so one copy of this script measures any
checkout with the same harness API (``build_server``, ``serve_locally``, the sandbox's ``Dispatcher``):

    PYTHONPATH=../old-tree .venv/bin/python bench/click_files.py
    PYTHONPATH=. .venv/bin/python bench/click_files.py --rounds 5 --json counts.json
    PYTHONPATH=. .venv/bin/python bench/click_files.py --config ../old-tree/examples/refund/hitl.yaml

Not a test; prints the two figures and the files, with the rounds each ran in.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
from aiohttp.web_protocol import RequestHandler

import hitl
from hitl.bot.server import app_runner, serve_locally
from hitl.bot.settings import BotSettings
from hitl.engine.domain.runs import RunStatus
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message, SlackState
from hitl.serve import Server, build_server

TREE = Path(hitl.__file__).resolve().parents[1]
"""The checkout measured: the one ``hitl`` was imported from."""
CONFIG = TREE / "examples" / "refund" / "hitl.yaml"
WORKFLOW = TREE / "examples" / "refund" / "workflow.yaml"
EXAMPLE = WORKFLOW.resolve().parent
"""The example's own code (its tools): the user's, though ``examples/refund`` links to ``hitl/demo/refund``."""
EFFECT = (EXAMPLE / "tools.py", "refund")
"""The run's effect: the approved step's tool (file, function)."""
OURS = ("engine", "bot", "hitl")
NOT_OURS = (Path("hitl") / "sandbox", EXAMPLE.relative_to(TREE))
"""Slack's stand-in (in production, Slack's code) and the example's tools (the user's)."""
EVENTS = "/slack/events"
SECRET = "bench-secret"
REVIEWER = "U_SUPPORT1"
REFUND = {"order_id": "78291", "amount": "10"}
"""Each run's refund: small, so that the rounds stay under the example's split-refunds rule (500 a customer in 24 h,
past which two finance approvers are asked) and every click is one support approval."""
MAX_ROUNDS = 40
WAIT = 30.0
"""Seconds any one step of the script may take before it gives up (a broken tree, not a slow machine)."""


def _approve_action() -> str:
    """Approve's ``action_id``, from wherever the tree keeps its controls (``bot/views/`` now, ``bot/`` before)."""
    for module in ("hitl.bot.views.controls", "hitl.bot.controls"):
        try:
            return str(importlib.import_module(module).ACTION_APPROVE)
        except ModuleNotFoundError:
            continue
    raise SystemExit(f"{TREE}: no module holds ACTION_APPROVE; this script needs updating for that tree")


@dataclass
class FileTrace:
    """The files whose code ran between the click's request entering the app and the ack (``answer``), and until
    the effect (``effect``): a profile hook, for this thread and the threads started after :meth:`install`, that
    counts only between :meth:`arm` and the effect."""

    answer: set[str] = field(default_factory=set)
    effect: set[str] = field(default_factory=set)
    phase: str = "idle"
    """``idle`` (not counting), ``armed`` (waiting for the request), ``answering`` until the ack, ``effecting``
    until the effect, then ``done``."""
    _ours: dict[str, str | None] = field(default_factory=dict)
    _effects: dict[str, bool] = field(default_factory=dict)
    _enter = RequestHandler._handle_request.__code__
    _answered = RequestHandler.log_access.__code__  # called once the answer's last byte is written

    def install(self) -> None:
        """Hook this thread and every thread started from now on."""
        threading.setprofile(self.hook)
        sys.setprofile(self.hook)

    def uninstall(self) -> None:
        """Unhook this thread and threads started from now on (the others keep a hook that no longer counts)."""
        sys.setprofile(None)
        threading.setprofile(None)

    def arm(self) -> None:
        """Count from the next request to ``/slack/events`` on."""
        self.answer, self.effect, self.phase = set(), set(), "armed"

    def hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        """The profile hook: each Python frame entered or resumed, while counting, names a file."""
        if event != "call" or self.phase in ("idle", "done"):
            return
        code = frame.f_code
        if code is self._enter or code is self._answered:
            self._mark(frame, entering=code is self._enter)
            return
        if self.phase == "armed":
            return
        name = self._ours.get(code.co_filename, "")
        if name == "":
            name = self._ours[code.co_filename] = _our_file(code.co_filename)
        if name is None:
            if self.phase == "effecting" and code.co_name == EFFECT[1] and self._in_effect_file(code.co_filename):
                self.phase = "done"
            return
        self.effect.add(name)
        if self.phase == "answering":
            self.answer.add(name)

    def _in_effect_file(self, filename: str) -> bool:
        found = self._effects.get(filename)
        if found is None:
            found = self._effects[filename] = Path(filename).resolve() == EFFECT[0]
        return found

    def _mark(self, frame: FrameType, *, entering: bool) -> None:
        request = frame.f_locals.get("request")
        if getattr(request, "path", None) != EVENTS:
            return  # a call to the emulated Slack Web API
        if entering and self.phase == "armed":
            self.phase = "answering"
        elif not entering and self.phase == "answering":
            self.phase = "effecting"


def _our_file(filename: str) -> str | None:
    """``filename`` relative to the tree when it is one of ours (links resolved), else None."""
    try:
        rel = Path(filename).resolve().relative_to(TREE)
    except ValueError:
        return None
    if not rel.parts or rel.parts[0] not in OURS or any(rel.is_relative_to(p) for p in NOT_OURS):
        return None
    return rel.as_posix()


async def until(what: str, done: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``done`` until it holds; a tree that never gets there stops the script with ``what``."""
    deadline = time.monotonic() + WAIT
    while not await done():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {WAIT:g} s waiting for {what}")
        await asyncio.sleep(0.01)


def workspace() -> SlackState:
    """The emulated Slack workspace: the example's channels and its reviewer."""
    state = SlackState(rate_limited=False)  # a few cards and clicks: Slack's pace is not what is measured
    for channel in ("refund-approvals", "finance-approvals", "general"):
        state.add_channel(channel)
    state.users[REVIEWER] = {"name": "support1", "real_name": "Support One", "tz": "UTC"}
    return state


@dataclass
class World:
    """``hitl serve``'s parts in this process, on a fresh SQLite store, and the emulated Slack it talks to."""

    state: SlackState
    rt: Server
    slack: Dispatcher
    trace: FileTrace
    config: Path
    """The hitl.yaml served, and each run's."""


@asynccontextmanager
async def world(tmp: Path, trace: FileTrace, config: Path) -> AsyncIterator[World]:
    """``hitl serve``'s parts built and served on 127.0.0.1 with ``tmp`` for its store and the example's shop."""
    os.environ["SHOP_DB"] = os.environ["HITL_SHOP_DB"] = str(tmp / "shop.db")  # the example's name, then and now
    state = workspace()
    emulator = await start_emulator(state)
    settings = BotSettings(
        slack_bot_token=state.token,
        slack_signing_secret=SECRET,
        slack_api_url=emulator.api_url,
        hitl_config=str(config),
        hitl_approval_channel="#refund-approvals",
        sweep_interval=3600,  # the sweeps run once, at start, and are not due again within the windows measured
    )
    rt = await build_server(settings, store=SqliteStore(tmp / "hitl.db"), retry_interval=0.01)
    runner = app_runner(rt.web_app(), shutdown_timeout=1.0)  # what `hitl serve` answers
    await runner.setup()
    port = await serve_locally(runner)
    http = aiohttp.ClientSession()
    slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}{EVENTS}", signing_secret=SECRET)
    rt.background.start()
    try:
        yield World(state, rt, slack, trace, config)
    finally:
        await http.close()
        await runner.cleanup()
        await rt.close()
        await emulator.close()


async def approve_one(w: World, *, traced: bool) -> None:
    """Start a refund run, wait for its card, click Approve on it (traced, if ``traced``) and wait for the run to
    finish. The background loop is paused from just before the click until its answer is back, so that (a) is the
    answer's own path, never a resume that happened to interleave; started again, it runs the queued resume at once,
    as the decision's wake would have (its sweeps ran at start and are not due again)."""
    wf = load_workflow(WORKFLOW)
    runs = w.rt.runtime.contexts.for_workflow(wf).runner
    run = await runs.start(wf, REFUND, config_path=str(w.config))
    if run.status is not RunStatus.PAUSED or run.approval is None:
        raise SystemExit(f"the refund run did not pause for approval: {run.status}")
    approval_id = run.approval.id

    async def carded() -> bool:
        return any(approval_id in m.text for m in cards(w.state))

    async def effected() -> bool:
        return w.trace.phase == "done"

    async def finished() -> bool:
        return (await runs.load(run.session_id)).status is RunStatus.COMPLETED

    await until("the approval's card", carded)
    await settle(w)
    [card] = [m for m in cards(w.state) if approval_id in m.text]
    await w.rt.background.stop()
    if traced:
        w.trace.arm()
    reply = await w.slack.click(REVIEWER, card, _approve_action())
    if reply.status != 200:
        raise SystemExit(f"the click was answered {reply.status}")
    w.rt.background.start()
    if traced:
        await until("the run's effect (tools:refund)", effected)
    await until("the run to finish", finished)
    await settle(w)
    w.trace.phase = "idle"


async def settle(w: World) -> None:
    """Until the bot has nothing left to post or update."""
    await w.rt.ctx.wait_idle()
    await w.rt.ctx.notifier.flush()


async def measure(rounds: int, config: Path) -> list[tuple[set[str], set[str]]]:
    """Per round, the files (a) and (b); after one click untraced, so that what runs once per process (lazy
    imports, caches filled) is not counted as the click's."""
    trace = FileTrace()
    trace.install()  # before any thread is started, so the store's and the tools' threads are traced too
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with world(Path(tmp), trace, config) as w:
                await approve_one(w, traced=False)
                found = []
                for _ in range(rounds):
                    await approve_one(w, traced=True)
                    found.append((trace.answer, trace.effect))
                return found
    finally:
        trace.uninstall()


def cards(state: SlackState) -> list[Message]:
    """The top-level messages the bot posted (cards), not the ephemeral answers or thread replies."""
    return [m for m in state.messages if not m.ephemeral_to and not m.thread_ts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="clicks traced, each on a run of its own (default 3)")
    ap.add_argument(
        "--config",
        type=Path,
        default=CONFIG,
        help="the hitl.yaml to serve (default: the tree's own examples/refund/hitl.yaml); another tree's, to compare "
        "two trees on one policy",
    )
    ap.add_argument("--json", type=Path, help="also write each round's files to this file")
    a = ap.parse_args()
    if not 1 <= a.rounds <= MAX_ROUNDS:
        ap.error(f"--rounds must be 1 to {MAX_ROUNDS} (the example's split-refunds rule caps a customer's refunds)")
    if not a.config.is_file():
        ap.error(f"--config {a.config}: no such file")
    found = asyncio.run(measure(a.rounds, a.config.resolve()))
    answers, effects = [f[0] for f in found], [f[1] for f in found]
    print(f"tree: {TREE}, serving {a.config} ({a.rounds} clicks traced, after one untraced)")
    print(f"(a) files run from the click entering the app to its ack:    {_figure(answers)}")
    print(f"(b) files run from the click entering the app to the effect: {_figure(effects)}")
    print("rounds in which each file's code ran, (a) and (b):")
    for name in sorted(set.union(*effects)):
        in_a, in_b = sum(name in s for s in answers), sum(name in s for s in effects)
        print(f"  {in_a}/{a.rounds} {in_b}/{a.rounds}  {name}")
    if a.json is not None:
        out = {
            "tree": str(TREE),
            "config": str(a.config),
            "rounds": [{"answer": sorted(x), "effect": sorted(y)} for x, y in found],
        }
        a.json.write_text(json.dumps(out, indent=2) + "\n")


def _figure(rounds: list[set[str]]) -> str:
    """One figure, or its range over the rounds when they differ."""
    low, high = min(len(r) for r in rounds), max(len(r) for r in rounds)
    return str(low) if low == high else f"{low}-{high} (by round: {', '.join(str(len(r)) for r in rounds)})"


if __name__ == "__main__":
    main()
