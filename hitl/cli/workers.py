"""``hitl serve --workers N``: N server processes on one port (``SO_REUSEPORT``), one supervisor.

Each worker is a whole ``hitl serve`` (its own event loop, background loop and replica id) on the shared store, as
replicas on several machines would be; the kernel spreads new connections among them. The supervisor only starts
them, passes a stop signal (and SIGHUP, the reload of hitl.yaml) on, and stops the rest when one dies (so an
orchestrator sees the failure and restarts the whole set, instead of a set that silently shrank).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from types import FrameType

__all__ = ["supervise"]


def supervise(workers: int, *, host: str, port: int, store: str | None, config: str | None) -> int:
    """Run ``workers`` server processes until a stop signal (exit 0) or until one of them exits (its code)."""
    cmd = [sys.executable, "-m", "hitl", "serve", "--host", host, "--port", str(port), "--workers", "1", "--reuse-port"]
    if store:
        cmd += ["--store", store]
    if config:
        cmd += ["--config", config]
    procs = [subprocess.Popen(cmd) for _ in range(workers)]
    stopping: list[int] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    def reload(signum: int, _frame: FrameType | None) -> None:
        for p in procs:  # each worker reads hitl.yaml again (hitl/reload.py); the supervisor reads nothing
            if p.poll() is None:
                p.send_signal(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, reload)
    code = 0
    try:
        while not stopping:
            ended = [p for p in procs if p.poll() is not None]
            if ended:
                code = ended[0].returncode or 1
                print(
                    f"hitl serve: worker {ended[0].pid} exited with {ended[0].returncode}; stopping the others",
                    file=sys.stderr,
                )
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code
