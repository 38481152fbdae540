"""The ``hitl`` command: the composition root that wires the engine (and, for ``serve``, the bot)."""

from __future__ import annotations

from hitl.cli.app import app, main

__all__ = ["app", "main"]
