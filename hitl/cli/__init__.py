"""The ``hitl`` command: the composition root that wires the engine (and, for ``serve``, the bot).

A command module imports at its top only what declares the commands (Typer, :mod:`hitl.cli.options`, the help's
classes); a command imports what it runs with when it runs, so ``hitl --help`` and ``hitl --version`` load no store,
runtime, Slack or server (``tests/cli/test_startup.py``; the time is measured by ``bench/cli_bench.py``)."""

from __future__ import annotations

from hitl.cli.app import app, main

__all__ = ["app", "main"]
