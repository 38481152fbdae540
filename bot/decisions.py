"""One path from a Slack click or command to the core's atomic decide, with words for every refusal."""

from __future__ import annotations

from typing import Any

from bot.blocks import who
from bot.context import BotContext
from bot.escape import label
from engine.domain.models import Approval, DecisionKind
from engine.errors import EngineError, ErrorCode

__all__ = ["decide", "done_text", "refusal_text"]


def refusal_text(exc: EngineError, approval: Approval | None) -> str:
    role = (approval.required_role if approval else None) or "a reviewer role"
    match exc.code:
        case ErrorCode.NOT_ELIGIBLE:
            return f":no_entry: You are not a reviewer for this request: it needs *{role}*."
        case ErrorCode.SELF_APPROVAL:
            return ":no_entry: You requested this action, so someone else has to decide it."
        case ErrorCode.DUPLICATE_VOTE:
            n = approval.quorum if approval else 2
            return f":ballot_box_with_check: You already voted. It needs {n} different approvers."
        case ErrorCode.STALE_VERSION | ErrorCode.HASH_MISMATCH:
            return ":arrows_counterclockwise: This request changed since this card was shown. Use the updated card."
        case ErrorCode.EXPIRED:
            return ":hourglass: This request expired. The requester has to propose it again."
        case ErrorCode.ALREADY_DECIDED:
            winner = exc.context.get("winner") or "someone else"
            status = exc.context.get("status", "decided")
            return f":lock: Already decided by {who(str(winner))} ({status}). Nothing changed."
        case ErrorCode.NOT_TRUSTABLE:
            return ":no_entry: This tool cannot be trusted for a session. Approve it once instead."
        case ErrorCode.NOT_FOUND:
            return ":grey_question: No such approval. `/hitl pending` lists what you can decide."
        case _:
            return f":warning: Not recorded: {exc.message}"


async def decide(
    ctx: BotContext,
    user_id: str,
    approval_id: str,
    kind: DecisionKind,
    *,
    version: int | None,
    action_hash: str | None,
    reason: str | None = None,
    args: dict[str, Any] | None = None,
) -> tuple[Approval | None, str | None]:
    """Decide as ``user_id``. Returns (approval after the decision, None) or (None, refusal for the user).

    A click carries the version and action hash it was shown: the decision binds to them in the store's one
    atomic step, with no read first. A command (``/hitl approve <id>``) binds to the current version. The run
    lifecycle queues the resume of a run waiting on it; any replica's background loop picks that up.
    """
    try:
        reviewer = await ctx.directory.reviewer(user_id)
        decided = await ctx.lifecycle.decide(
            approval_id,
            reviewer,
            kind,
            expected_version=version,
            expected_hash=action_hash,
            reason=reason,
            args=args,
            via="slack",
            resume="queue",
        )
    except EngineError as exc:
        if exc.code is not ErrorCode.NOT_FOUND:
            ctx.metrics.refusals.labels(code=str(exc.code)).inc()
        current = None
        if exc.code is not ErrorCode.NOT_FOUND:
            try:
                current = await ctx.store.approvals.get(approval_id)
            except EngineError:
                current = None
        return None, refusal_text(exc, current)
    ctx.metrics.decided(decided.approval, kind, ctx.clock.now())
    return decided.approval, None


def done_text(a: Approval | None) -> str:
    """What the decider is told after a recorded decision."""
    if a is None:
        return "Done."
    if a.is_open:
        return f":ballot_box_with_check: Vote recorded on `{a.id}`: {len(a.approvers)} of {a.quorum} approvals."
    return f":white_check_mark: `{a.id}` ({label(a.tool, 60)}) is now *{a.status}*."
