"""Stopping the processes tests start: asked first, killed when they do not go, never leaked."""

from __future__ import annotations

import asyncio
import signal
import subprocess

__all__ = ["stop_process", "stopped"]


def stop_process(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, sig: int = signal.SIGTERM, grace: float = 10.0
) -> int | None:
    """Send ``sig`` and wait up to ``grace`` seconds; kill it if it is still there. Returns the exit code it chose,
    or None when it had to be killed (so a test can assert that it stopped by itself)."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        return None


async def stopped(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, sig: int = signal.SIGTERM, grace: float = 10.0
) -> int | None:
    """:func:`stop_process` from a coroutine: the event loop runs on while the process stops. A `hitl serve` that
    is asked to stop first waits for its Slack calls in flight; when the emulated Slack answering them runs in this
    loop, a blocking wait held their answers back, and such a stop waited out the server's whole drain (10 s)."""
    return await asyncio.to_thread(stop_process, proc, sig=sig, grace=grace)
