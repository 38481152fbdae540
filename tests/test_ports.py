"""The ports tests hand to the servers they start: never from the kernel's ephemeral range, never shared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.ports import FIRST, LAST

ROOT = Path(__file__).resolve().parents[1]


def _ports_of(worker: str, count: int, n: int) -> list[int]:
    """``n`` ports as the xdist worker ``worker`` of ``count`` is handed them (a process of its own)."""
    code = f"from tests.ports import free_port; print(*[free_port() for _ in range({n})])"
    env = {"PYTHONPATH": str(ROOT), "PYTEST_XDIST_WORKER": worker, "PYTEST_XDIST_WORKER_COUNT": str(count)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


def test_two_workers_are_never_handed_the_same_port_nor_one_the_kernel_hands_out() -> None:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(x) for x in f.read().split())
    first, second = _ports_of("gw0", 2, 300), _ports_of("gw1", 2, 300)
    assert not set(first) & set(second)
    assert len(set(first)) == 300  # one worker does not get a port again while it has others to give
    assert all(FIRST <= p <= LAST and not low <= p <= high for p in first + second)
