"""``hitl stats`` (a CLI process of its own, reading the store) tells per tool how long its consequence took before
its approval was asked and how each ended: shown, busy, timed out, failed. On SQLite and Redis."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.agents.test_consequences import CONFIG
from tests.backends import fresh_store_url

ROOT = Path(__file__).resolve().parents[2]


async def _propose_four(store_url: str, clock: FakeClock) -> None:
    store = open_store(store_url)
    try:
        svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)  # refund's bound 0.5 s, one worker
        for order, reason in (("A", ""), ("W", "wrong"), ("S", "sleep"), ("B", "")):  # S holds the one worker: B busy
            args = {"order_id": order, "amount": 30, "reason": reason}
            await svc.propose(ProposeRequest("refund", args, session_id=order))
        await svc.propose(ProposeRequest("note", {"text": "x"}, session_id="n"))  # no consequence: no figures
    finally:
        await store.close()  # writes the counts it held


def _stats(store_url: str, now: float, *more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HITL_STORE": store_url, "HITL_NOW": str(now), "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    env.pop("HITL_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "hitl", "stats", "--since", "1d", *more], env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_stats_tells_each_tools_consequence_time_and_outcomes(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = fresh_store_url(backend, request, tmp_path, tag="csqstats")
    clock = FakeClock()
    asyncio.run(_propose_four(url, clock))
    done = _stats(url, clock.now(), "--json")
    assert done.returncode == 0, done.stderr
    rows: dict[tuple[str, str], Any] = {(r["tool"], r["tier"]): r for r in json.loads(done.stdout)["rows"]}
    c = rows[("refund", "approve")]["consequences"]
    assert (c["count"], c["shown"], c["busy"], c["timed_out"], c["failed"]) == (4, 1, 1, 1, 1), c
    assert c["sum_seconds"] >= 0.5  # the one that slept was given up at its bound, not before
    assert c["p90_seconds_at_most"] is not None and c["p90_seconds_at_most"] >= 0.5
    assert rows[("note", "approve")]["consequences"]["count"] == 0
    text = _stats(url, clock.now())
    assert text.returncode == 0, text.stderr
    lines = [line.strip() for line in text.stdout.splitlines()]
    at = next(i for i, line in enumerate(lines) if line.startswith("consequence refund (approve) 4, p50 <= "))
    assert lines[at + 1] == "shown 1 · busy 1 · timed out 1 · failed 1"
    assert not any(line.startswith("consequence note") for line in lines)
    assert max(map(len, text.stdout.splitlines())) <= 80
