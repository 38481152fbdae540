"""Running a command's work: its errors printed as one line (or one JSON object) and mapped to exit codes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import typer

from engine.errors import EngineError
from hitl.cli.output import Out

__all__ = ["run_command"]


def run_command(out: Out, work: Callable[[], Coroutine[Any, Any, int]]) -> None:
    """Run ``work`` and exit with its code: 1 for an engine error, 2 for a usage error, 130 on Ctrl-C."""
    try:
        code = asyncio.run(work())
    except EngineError as exc:
        out.error(str(exc.code), exc.message)
        raise typer.Exit(2 if exc.code.usage else 1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(code)
