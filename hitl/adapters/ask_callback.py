"""``SlackAsk``: a safe ``ask`` callback for Strands' ``HumanInTheLoop(ask=...)``.

It needs no Strands import: ``HumanInTheLoop`` calls ``ask(prompt)`` with ``Approve "<tool>"?\n  Input: <json>``
and reads ``y`` as approve. The approval goes through hitl's store; ``hitl serve`` on the same store posts the card.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from hitl.engine.agents.ask import Approvals
from hitl.engine.errors import EngineError

__all__ = ["SlackAsk", "parse_prompt"]

log = logging.getLogger(__name__)

_PROMPT = re.compile(r'\AApprove "(?P<tool>[A-Za-z_][A-Za-z0-9_.:/\-]{0,127})"\?\n  Input: (?P<input>\{.*\})\Z', re.S)


def parse_prompt(prompt: str) -> tuple[str, dict[str, Any]] | None:
    """Tool and arguments from Strands' exact prompt ``Approve "<tool>"?\\n  Input: <json object>``; None for
    anything else (the classifier form ``Approve "<tool>" — <reason>?`` included): the caller fails closed."""
    m = _PROMPT.match(prompt or "")
    if not m:
        return None
    try:
        args = json.loads(m.group("input"))
    except json.JSONDecodeError:
        return None
    return (m.group("tool"), args) if isinstance(args, dict) else None


class SlackAsk:
    """An ``ask`` for Strands' ``HumanInTheLoop``: ``HumanInTheLoop(ask=SlackAsk(approvals, session="run-42"))``.

    The prompt must be exactly Strands' own form, else the answer is "no" (a prompt hitl cannot read is never
    filed under another name). Its approvals offer no Modify (``ask`` can only answer yes or no, so an edit could
    not reach the tool), and a Trust answers ``"y"``: it approves whatever ``enable_trust`` says, and hitl itself
    stops asking for that tool in this session. Prefer :class:`HitlIntervention`, which sees the real call.
    """

    def __init__(
        self, approvals: Approvals, *, session: str, requester: str | None = None, wait: float | None = None
    ) -> None:
        self.approvals = approvals
        self.session = session
        self.requester = requester
        self.wait = wait

    async def __call__(self, prompt: str | None = None, **_: Any) -> str:
        parsed = parse_prompt(prompt or "")
        if parsed is None:
            log.warning("SlackAsk cannot read this prompt exactly; the call is denied: %r", (prompt or "")[:200])
            return "n"
        tool, args = parsed
        try:
            answer = await self.approvals.ask(
                tool, args, session=self.session, requester=self.requester, wait=self.wait, modifiable=False
            )
        except EngineError as exc:
            log.warning("hitl failed while asking about %s; the call is denied: %s", tool, exc.message)
            return "n"
        return "y" if answer.approved else "n"
