"""The async ask-callback bridge: ``SlackAsk`` is an ``ask(prompt)`` for agent frameworks.

It works as the ``ask`` of Strands' ``HumanInTheLoop`` (which calls ``ask(prompt)`` with text like
``Approve "delete_file"?\\n  Input: {...}`` and reads ``y``/``yes`` as approve, ``t``/``trust`` as trust,
anything else as deny), and also takes structured ``tool=``, ``args=``, ``evidence=``, ``session=`` for
richer cards. The decision can come from any replica; a restarted agent re-attaches to the same approval.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.ask import Approvals
from engine.domain.models import DecisionKind

__all__ = ["SlackAsk", "parse_prompt"]

_PROMPT = re.compile(r'^\s*Approve\s+"(?P<tool>[^"\n]{1,128})"\?\s*(?:\n\s*Input:\s*(?P<input>.*))?$', re.S)


def parse_prompt(prompt: str) -> tuple[str, dict[str, Any]]:
    """Tool and arguments from a Strands-style prompt; anything else is asked about as-is (fail closed)."""
    m = _PROMPT.match(prompt or "")
    if not m:
        return "ask", {"prompt": (prompt or "")[:2000]}
    raw = (m.group("input") or "").strip()
    try:
        args = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        args = {"input": raw[:2000]}
    return m.group("tool"), args if isinstance(args, dict) else {"input": args}


class SlackAsk:
    """``answer = await SlackAsk(approvals, session="run-42")('Approve "refund"?\\n  Input: {...}')``."""

    def __init__(
        self, approvals: Approvals, *, session: str, requester: str | None = None, wait: float | None = None
    ) -> None:
        self.approvals = approvals
        self.session = session
        self.requester = requester
        self.wait = wait

    async def __call__(
        self,
        prompt: str | None = None,
        *,
        tool: str | None = None,
        args: dict[str, Any] | None = None,
        evidence: str = "",
        session: str | None = None,
        **_: Any,
    ) -> str:
        if tool is None:
            tool, parsed = parse_prompt(prompt or "")
            args = args if args is not None else parsed
        answer = await self.approvals.ask(
            tool,
            args or {},
            session=session or self.session,
            evidence=evidence,
            requester=self.requester,
            wait=self.wait,
        )
        if not answer.approved:
            return "n"
        last = answer.approval.decisions[-1] if answer.approval and answer.approval.decisions else None
        return "t" if last is not None and last.kind is DecisionKind.TRUST else "y"
