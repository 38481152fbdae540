"""A question to a person: the tool ``ask_person`` (``mcp.ask_person`` in ``hitl.yaml``), whose approval a reviewer
answers with text instead of approving it.

Its arguments are the asker's ``question``; an answer is an edit (a ``modify``) that adds ``answer`` and changes
nothing else, so it goes through the one decide path (version and action hash, exactly once, audited) and every
store keeps it. Approving a question as it is (or trusting it) answers nothing, and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hitl.engine.domain.models import Approval, DecisionKind

__all__ = ["ASK_PERSON", "QUESTION_CAP", "answer_problem"]

ASK_PERSON = "ask_person"
"""The reserved tool name of a question to a person."""
QUESTION_CAP = 4000
"""The longest question (and answer) ``ask_person`` takes, in characters."""


def answer_problem(current: Approval, kind: DecisionKind, args: Mapping[str, Any] | None) -> str | None:
    """Why a decision cannot stand on a question (None: it can, or ``current`` is no question). ``args``: the
    arguments a modify runs with, after the edit."""
    if current.tool != ASK_PERSON:
        return None
    if kind in (DecisionKind.APPROVE, DecisionKind.TRUST):
        return (
            f"{current.id} is a question: answer it (Slack's Answer, the API's answer field) or reject it to "
            "decline; approving it answers nothing"
        )
    if kind is not DecisionKind.MODIFY:
        return None
    answer = (args or {}).get("answer")
    if not isinstance(answer, str) or not answer.strip():
        return f"an answer to {current.id} needs its text: send a non-empty answer"
    if {k: v for k, v in (args or {}).items() if k != "answer"} != dict(current.execute_args):
        return f"an answer to {current.id} adds the answer and changes nothing else: send the answer alone"
    return None
