"""Stopping the processes tests start: asked first, killed when they do not go, never leaked."""

from __future__ import annotations

import signal
import subprocess

__all__ = ["stop_process"]


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
