"""Logging for the long-running commands (``hitl serve``, ``hitl mcp``): one JSON object per line for a log
collector, or plain text for a person at a terminal.

Every line carries what it is about: ``approval_id`` and ``session_id`` when it was logged while the engine handled
them (:mod:`hitl.engine.process.log_context`), and ``replica``, the process's name among its peers.
``HITL_LOG_FORMAT`` says ``json``, ``text`` or ``auto`` (the default: text when the stream is a terminal, JSON
otherwise).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal, TextIO

from pythonjsonlogger.json import JsonFormatter

from hitl.engine.process.log_context import current

__all__ = ["LogFormat", "configure_logging"]

LogFormat = Literal["auto", "json", "text"]
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Context(logging.Filter):
    """Adds what the line is about (and the replica) to every record, for the formatter to show."""

    def __init__(self, replica: str | None) -> None:
        super().__init__()
        self.replica = replica

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current().items():
            setattr(record, key, value)
        if self.replica is not None:
            record.replica = self.replica
        return True


class _Text(logging.Formatter):
    """The plain format, with what the line is about appended when known."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        about = [f"{k}={getattr(record, k)}" for k in ("approval_id", "session_id") if hasattr(record, k)]
        return f"{line} [{' '.join(about)}]" if about else line


def configure_logging(
    level: int = logging.INFO,
    *,
    replica: str | None = None,
    fmt: LogFormat | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send the root logger's records to ``stream`` (stderr) in ``fmt`` (``HITL_LOG_FORMAT``, default ``auto``);
    replaces the handlers configured before. Returns the handler."""
    out = stream if stream is not None else sys.stderr
    chosen = fmt or os.environ.get("HITL_LOG_FORMAT", "auto").strip().lower() or "auto"
    if chosen not in ("auto", "json", "text"):
        raise ValueError(f"HITL_LOG_FORMAT must be auto, json or text, not {chosen!r}")
    as_json = chosen == "json" or (chosen == "auto" and not (hasattr(out, "isatty") and out.isatty()))
    handler = logging.StreamHandler(out)
    handler.addFilter(_Context(replica))
    if as_json:
        handler.setFormatter(
            JsonFormatter(
                ["levelname", "name", "message"],
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp="time",
            )
        )
    else:
        handler.setFormatter(_Text(_TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
