"""What a log line is about: the approval and the run being handled, carried in context variables so every log
call made while handling them names them, without passing them down every call. The log formatter of the process
(``hitl.logs``) reads them; the engine only sets them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["about", "current"]

_APPROVAL: ContextVar[str | None] = ContextVar("hitl_approval_id", default=None)
_SESSION: ContextVar[str | None] = ContextVar("hitl_session_id", default=None)


@contextlib.contextmanager
def about(*, approval_id: str | None = None, session_id: str | None = None) -> Iterator[None]:
    """Within the block, log lines name ``approval_id`` and/or ``session_id`` (the ones not given keep theirs)."""
    tokens = []
    if approval_id is not None:
        tokens.append((_APPROVAL, _APPROVAL.set(approval_id)))
    if session_id is not None:
        tokens.append((_SESSION, _SESSION.set(session_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current() -> dict[str, str]:
    """The approval and session the current task is handling, as far as known."""
    out = {}
    if (approval := _APPROVAL.get()) is not None:
        out["approval_id"] = approval
    if (session := _SESSION.get()) is not None:
        out["session_id"] = session
    return out
