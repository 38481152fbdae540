"""Ports for the servers tests start on 127.0.0.1, never handed to two of them at once.

Asking the kernel for a free port (bind to port 0, read it, close) and handing it to a server started later leaves
a window in which anything else may take that port. Under pytest-xdist the other worker starts servers of its own all
the time, and the kernel draws every port-0 bind and every outgoing connection from the same ephemeral range. When a
`hitl serve` started by one worker found the port taken by another worker's `hitl serve`, the test's health check
and signed click reached the other process, which answered 200: the test then judged a process that had never seen
the click.

So ports come from below the ephemeral range (which the kernel never hands out by itself), each xdist worker from a
slice of its own, in turn: a port comes back to the same worker only after every other port of its slice was
handed out. A port something else on the machine holds is skipped.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

__all__ = ["free_port"]

FIRST, LAST = 20_000, 31_999
"""Below Linux's default ephemeral range (32768-60999: ``/proc/sys/net/ipv4/ip_local_port_range``)."""


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw")) if worker.startswith("gw") else 0
    size = (LAST - FIRST + 1) // max(count, 1)
    start = FIRST + index * size
    return range(start, start + size)


def _in_turn(ports: range) -> list[int]:
    """``ports`` in turn from a point of this process's own (two test sessions on one machine, a developer's and
    another's, would otherwise hand out the same ports in the same order, each taking the other's servers for its
    own)."""
    start = os.getpid() % len(ports)
    return [*ports[start:], *ports[:start]]


_ports = itertools.cycle(_in_turn(_slice()))
_lock = threading.Lock()


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now and no other test process is handed."""
    with _lock:
        for _ in range(LAST - FIRST + 1):
            port = next(_ports)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # held by something on this machine (or a connection of it lingering): the next one
            return port
    raise RuntimeError(f"no free port of 127.0.0.1 in {FIRST}-{LAST}")
