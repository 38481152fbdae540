"""Signed modal ``private_metadata``: what a modal was opened for cannot be changed by the client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from hitl.bot.errors import BotError, BotErrorCode

__all__ = ["Signer"]


class Signer:
    """Signs and checks the private metadata of modal forms, so a form cannot be altered between open and submit."""

    def __init__(self, secret: str) -> None:
        if not secret:
            raise BotError("a signing secret is required to sign modal metadata", code=BotErrorCode.MISCONFIGURED)
        self._key = hashlib.sha256(b"hitl-modal:" + secret.encode()).digest()

    def dumps(self, data: dict[str, Any]) -> str:
        body = base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()[:32]
        return f"{body}.{mac}"

    def loads(self, token: str) -> dict[str, Any]:
        body, _, mac = (token or "").rpartition(".")
        good = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()[:32]
        if not body or not hmac.compare_digest(mac, good):
            raise BotError("modal metadata was altered", code=BotErrorCode.TAMPERED)
        try:
            data = json.loads(base64.urlsafe_b64decode(body.encode()))
        except ValueError:
            raise BotError("modal metadata is malformed", code=BotErrorCode.TAMPERED) from None
        if not isinstance(data, dict):
            raise BotError("modal metadata is malformed", code=BotErrorCode.TAMPERED)
        return data
