"""A real SMTP server for the e-mail tests (aiosmtpd on a free port of 127.0.0.1): it keeps every message it accepts,
and answers the next ones with a refusal when a test says so."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller

from tests.ports import free_port

__all__ = ["Mailbox", "Received", "smtp_server"]


@dataclass(frozen=True)
class Received:
    """One message the server accepted: its envelope and its bytes, parsed."""

    sender: str
    recipients: tuple[str, ...]
    raw: bytes
    message: EmailMessage

    def part(self, subtype: str) -> str:
        """The text of the ``text/<subtype>`` part."""
        body = self.message.get_body(preferencelist=(subtype,))
        assert body is not None and body.get_content_type() == f"text/{subtype}", subtype
        content: str = body.get_content()
        return content


@dataclass
class Mailbox:
    """What the server received, and the refusals it still has to give (each answers one DATA, in order)."""

    port: int = 0
    received: list[Received] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """SMTP replies like ``451 4.3.0 try again later`` to answer the next messages with instead of accepting."""

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        if self.refusals:
            return self.refusals.pop(0)
        raw = bytes(envelope.original_content or envelope.content)
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.received.append(Received(envelope.mail_from, tuple(envelope.rcpt_tos), raw, parsed))
        return "250 2.0.0 Ok: queued"

    def to(self, address: str) -> list[Received]:
        """The messages whose envelope went to ``address``."""
        return [r for r in self.received if address in r.recipients]


@contextmanager
def smtp_server() -> Iterator[Mailbox]:
    """An SMTP server on 127.0.0.1 for the length of the block."""
    box = Mailbox(port=free_port())
    controller = Controller(box, hostname="127.0.0.1", port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
