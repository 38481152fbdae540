"""Sending one message over SMTP (aiosmtplib), and what the server's answer means for a retry.

The envelope is given explicitly (sender and the one recipient): no header of the message ever adds a recipient.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from email.message import EmailMessage

import aiosmtplib

from hitl.engine.config.email import EmailSpec
from hitl.engine.errors import PolicyError

__all__ = ["TIMEOUT", "SmtpOutcome", "SmtpSender", "credentials"]

TIMEOUT = 30.0
"""Seconds one conversation with the server may take."""


@dataclass(frozen=True)
class SmtpOutcome:
    """What the server said: ``sent``, else ``code`` (the SMTP reply code; None when it was never reached) and
    whether trying again could help (``permanent``: a 5xx answer, which the same message will get again)."""

    sent: bool
    detail: str
    code: int | None = None
    permanent: bool = False


def credentials(spec: EmailSpec) -> tuple[str, str] | None:
    """The SMTP login ``email.username_env`` and ``email.password_env`` name, read from the environment; None when
    none is configured. Refuses to start (fail closed) when a named variable is not set."""
    if spec.username_env is None or spec.password_env is None:
        return None
    user, password = os.environ.get(spec.username_env, ""), os.environ.get(spec.password_env, "")
    if not user or not password:
        raise PolicyError(
            f"email.username_env and email.password_env name {spec.username_env} and {spec.password_env}, which "
            "must both be set: export the SMTP login, or remove both from hitl.yaml to send without one"
        )
    return user, password


class SmtpSender:
    """Sends messages to the server ``email:`` names, one connection per message (a relay closes idle ones)."""

    def __init__(self, spec: EmailSpec, login: tuple[str, str] | None) -> None:
        self.spec = spec
        self.login = login

    async def send(self, message: EmailMessage, *, to: str) -> SmtpOutcome:
        """Hand ``message`` to the server for ``to`` alone."""
        user, password = self.login if self.login is not None else (None, None)
        try:
            _, reply = await aiosmtplib.send(
                message,
                sender=self.spec.from_,
                recipients=[to],
                hostname=self.spec.host,
                port=self.spec.port,
                username=user,
                password=password,
                use_tls=self.spec.implicit_tls,
                start_tls=self.spec.starttls,
                timeout=TIMEOUT,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            first = exc.recipients[0]
            return SmtpOutcome(False, f"{first.code} {first.message}", first.code, first.code >= 500)
        except aiosmtplib.SMTPResponseException as exc:
            return SmtpOutcome(False, f"{exc.code} {exc.message}", exc.code, exc.code >= 500)
        except (aiosmtplib.SMTPException, OSError) as exc:
            return SmtpOutcome(False, f"{type(exc).__name__}: {exc}")
        return SmtpOutcome(True, reply)
