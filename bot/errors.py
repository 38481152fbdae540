"""Errors raised by the bot::

BotError          root (with a BotErrorCode)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["BotError", "BotErrorCode"]


class BotErrorCode(StrEnum):
    """Why the Slack adapter refused something."""

    MISCONFIGURED = "misconfigured"
    BAD_PAYLOAD = "bad_payload"
    TAMPERED = "tampered"
    SLACK_API = "slack_api"


class BotError(Exception):
    """A refusal of the Slack adapter (a bad payload, a tampered form, a misconfiguration), with a code."""

    def __init__(self, message: str, *, code: BotErrorCode, **context: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.context = context

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"
