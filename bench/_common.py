"""Helpers shared by the benchmarks: a private redis-server, `hitl serve` as a process, timing and table printing."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from redis.asyncio import Connection
from report import record, record_heading

from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer

if TYPE_CHECKING:
    from hitl.engine.ports import Store
    from hitl.testing import FakeClock


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server on 127.0.0.1 for the benchmark's own use."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on the PATH; run `make redis` first")
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d],
            stdout=subprocess.DEVNULL,
        )
        try:
            for _ in range(500):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.01)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


async def stop_process(proc: subprocess.Popen[bytes], *, sig: int = signal.SIGTERM, timeout: float = 15.0) -> bool:
    """Stop a process the benchmark started: ``sig``, then a kill when it has not exited within ``timeout`` seconds.
    Waited for off the event loop: the Slack emulator runs on it, and a stopping `hitl serve` may still be sending
    it the follow-ups of its last requests. True when the process stopped by itself."""
    proc.send_signal(sig)
    try:
        await asyncio.to_thread(proc.wait, timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        await asyncio.to_thread(proc.wait, timeout)
        return False


class BareCommits:
    """The floor of a SQLite store's write: bare write transactions of one row each, on a WAL file with the same
    ``synchronous`` setting."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        self.conn.execute("CREATE TABLE floor (k INTEGER PRIMARY KEY, v TEXT)")
        self._count = itertools.count()

    def commit(self, n: int = 1) -> None:
        """``n`` transactions, one after another."""
        for _ in range(n):
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT OR REPLACE INTO floor VALUES (?, ?)", (next(self._count) % 1000, "x" * 500))
            self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux ``/proc``), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spread(samples: Sequence[float], fmt: str = "{:.1f}") -> str:
    """``min / median / max`` of per-round figures."""
    return " / ".join(fmt.format(x) for x in (min(samples), statistics.median(samples), max(samples)))


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median: the order statistics ``(x[j], x[n-1-j])`` with the
    largest ``j`` such that the median lies between them with at least ``confidence`` (binomial, p = 1/2)."""
    xs = sorted(samples)
    n = len(xs)
    best = 0
    for j in range(n // 2):
        # P(x[j] <= median <= x[n-1-j]) = P(j < B <= n-1-j) for B ~ Binomial(n, 1/2), B = samples below the median
        covered = sum(math.comb(n, i) for i in range(j + 1, n - j)) / 2**n
        if covered < confidence:
            break
        best = j
    return xs[best], xs[n - 1 - best]


SUPPORT = Reviewer(id="U_SUPPORT1", roles=frozenset({"support"}))
"""The reviewer whose approvals the store benchmarks record."""


def support_approves(a: Approval, *, via: str = "api") -> DecideCommand:
    """:data:`SUPPORT`'s approval of ``a`` as it was read (its version and its action's hash), made through ``via``."""
    return DecideCommand(
        approval_id=a.id,
        reviewer=SUPPORT,
        kind=DecisionKind.APPROVE,
        expected_version=a.version,
        expected_hash=a.action_hash,
        via=via,
    )


async def wake_after_decision_ms(
    waiter: Store, decider: Store, approval: Approval, decision: DecideCommand, clock: FakeClock, *, settle: float
) -> float:
    """ms from the return of ``decision`` (recorded through ``decider``) to the wake-up of a waiter on ``approval``
    in ``waiter`` (another store than ``decider`` stands for another process); ``settle``: the seconds the waiter is
    given to start waiting before the decision."""
    woke: list[float] = []

    async def wait() -> None:
        await waiter.approvals.wait_changed(approval.id, after_version=approval.version, timeout=10)
        woke.append(time.perf_counter())

    task = asyncio.create_task(wait())
    await asyncio.sleep(settle)  # the waiter is waiting
    await decider.approvals.decide(decision, now=clock.now())
    decided = time.perf_counter()
    await task
    return (woke[0] - decided) * 1000


def interleaved_options(description: str | None, *, n: int, warm: int) -> tuple[argparse.Namespace, int]:
    """The command line of a benchmark whose contenders run in interleaved rounds: ``-n`` measured cycles per
    contender over ``--rounds`` rounds, after ``--warm`` warm-up cycles (``n``, ``warm``: their defaults); with the
    cycles each contender runs per round."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("-n", type=int, default=n, help="measured cycles per contender, over all rounds")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warm", type=int, default=warm)
    a = ap.parse_args()
    return a, max(1, a.n // a.rounds)


def heading(text: str) -> None:
    """Print a heading for the figures after it (and keep it for the published report, when one is open)."""
    print(text)
    record_heading(text)


def row(label: str, measured: str, target: str = "", ok: bool | None = None) -> None:
    """Print a figure beside its target (and keep it for the published report, when one is open)."""
    mark = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"  {label:<52} {measured:>16}   {target:<18}{mark}")
    record(label, measured, target, ok)


class CountingConnection(Connection):
    """Counts what the client writes to the socket: one write per command or per pipeline (a round trip)."""

    writes = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.writes += 1
        await super().send_packed_command(command, check_health)


def serve_env(url: str, token: str, api_url: str, *, secret: str = "bench-secret") -> dict[str, str]:
    """The environment a benchmark's `hitl serve` runs in: this checkout's hitl on the store ``url``, the Slack
    emulator at ``api_url`` (its bot ``token``, signing ``secret``), the refund example's hitl.yaml and its channel."""
    root = Path(__file__).resolve().parents[1]
    return {
        **os.environ,
        "PYTHONPATH": str(root),
        "SLACK_BOT_TOKEN": token,
        "SLACK_SIGNING_SECRET": secret,
        "SLACK_API_URL": api_url,
        "HITL_STORE": url,
        "HITL_CONFIG": str(root / "examples" / "refund" / "hitl.yaml"),
        "HITL_APPROVAL_CHANNEL": "#refund-approvals",
    }


async def start_serve(
    url: str, token: str, api_url: str, workdir: Path, *, secret: str = "bench-secret"
) -> tuple[subprocess.Popen[bytes], int]:
    """`hitl serve` as a real process on a free port of 127.0.0.1, on the store ``url``, talking to the Slack
    emulator at ``api_url`` with the refund example's hitl.yaml; returns it and its port once /healthz answers."""
    port = free_port()
    log = (workdir / f"serve-{port}.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitl", "serve", "--port", str(port)],
        env=serve_env(url, token, api_url, secret=secret),
        cwd=workdir,
        stdout=log,
        stderr=log,
    )
    async with aiohttp.ClientSession() as http:
        for _ in range(800):
            try:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                    if resp.status == 200:
                        return proc, port
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.025)
    proc.kill()
    raise SystemExit("hitl serve did not start")
