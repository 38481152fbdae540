"""Running a command's work: its errors printed as one line (or one JSON object) and mapped to exit codes."""

from __future__ import annotations

import asyncio
import errno
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import typer

from hitl.cli.loading import loaded
from hitl.cli.output import Out
from hitl.engine.errors import EngineError

__all__ = ["run_command", "run_service"]


def run_command(out: Out, work: Callable[[], Coroutine[Any, Any, int]], *, address: str = "--host/--port") -> None:
    """Run ``work`` and exit with its code: 1 for an engine error, 2 for a usage error, 130 on Ctrl-C.
    ``address``: the options that move a server elsewhere when its address is taken (named in the error)."""
    loaded()  # what the command runs with is imported: the collector's usual thresholds from here
    try:
        code = asyncio.run(work())
    except EngineError as exc:
        out.error(str(exc.code), exc.message)
        raise typer.Exit(2 if exc.code.usage else 1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise
        # A server that cannot bind its address: one line that says what to do, not a traceback.
        which = "address_in_use" if exc.errno == errno.EADDRINUSE else "address_unavailable"
        out.error(which, f"{exc.strerror or exc}; stop what holds it, or pick another address with {address}")
        raise typer.Exit(1) from None
    raise typer.Exit(code)


def run_service(out: Out, work: Callable[[], Coroutine[Any, Any, int]], *, address: str = "--host/--port") -> None:
    """:func:`run_command` for a command that runs until stopped (``serve``, ``demo``, ``mcp --http``): SIGINT and
    SIGTERM stop it cleanly (its ``finally`` blocks run, exit 0), even when it was started with SIGINT ignored, as a
    background job, ``nohup`` and some CI runners start processes."""
    got: list[int] = []

    async def until_stopped() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def stop(signum: int) -> None:
            got.append(signum)
            task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop, signum)
        try:
            return await work()
        except asyncio.CancelledError:
            if not got:
                raise
            return 0  # asked to stop, and stopped

    run_command(out, until_stopped, address=address)
