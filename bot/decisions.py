"""One path from a Slack click or command to the core's atomic decide, with words for every refusal."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hitl.bot.context import BotContext
from hitl.bot.views.blocks import who
from hitl.bot.views.escape import label
from hitl.engine.domain.decide import closed_refusal
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.domain.practice import is_practice, practice_note
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.service import AnswerWindow

__all__ = ["NOT_RECORDED", "decide", "done_text", "late_text", "redraw", "redraw_stale", "refusal_text"]

log = logging.getLogger(__name__)

NOT_RECORDED = (
    ":warning: Not recorded: the approval store did not answer in time, so nothing was decided. Try again in a moment."
)
_MARGIN = 0.5
"""Seconds past the store's deadline that a surface still waits for the store's answer (a step that began in time
finishes in this margin) before it tells the person nothing was recorded."""
_REREAD = 0.25
"""Seconds past the margin that a decision the store did not record in time may still spend reading its approval
again, to tell the person who decided it instead: what Slack's 3 s leave after the budget (2 s) and the margin."""
_UNRECORDED = (ErrorCode.TOO_LATE, ErrorCode.STORE_ERROR)
"""The refusals that say only that the store did not record the decision in time, not why it could not be."""


def refusal_text(exc: EngineError, approval: Approval | None) -> str:
    """What the person who clicked is told when their decision was refused, in their words, not the engine's."""
    role = (approval.required_role if approval else None) or "a reviewer role"
    match exc.code:
        case ErrorCode.NOT_ELIGIBLE if approval is not None and approval.tier is Tier.SELF:
            return (
                ":no_entry: This is not yours: only the person the agent acts for confirms it. Nothing changed; "
                "your click is in the audit trail."
            )
        case ErrorCode.NOT_ELIGIBLE:
            return f":no_entry: You are not a reviewer for this request: it needs *{role}*."
        case ErrorCode.SELF_APPROVAL if exc.context.get("by_delegation"):
            return (
                ":no_entry: A delegation ties you to the person who requested this, so neither of you decides it "
                "(separation of duties)."
            )
        case ErrorCode.SELF_APPROVAL:
            return ":no_entry: You requested this action, so someone else has to decide it."
        case ErrorCode.DUPLICATE_VOTE if exc.context.get("by_delegation"):
            n = approval.quorum if approval else 2
            return (
                ":ballot_box_with_check: A delegation ties you to someone who already voted: together you are one "
                f"vote. It needs {n} different approvers."
            )
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
        case ErrorCode.HALTED:
            return f":octagonal_sign: Not approved: {label(exc.message, 400)}. Reject still works."
        case ErrorCode.TOO_LATE | ErrorCode.STORE_ERROR:
            return NOT_RECORDED
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
    late: Callable[[Approval], Awaitable[None]] | None = None,
    view: str | None = None,
    confirm: dict[str, str] | None = None,
) -> tuple[Approval | None, str | None]:
    """Decide as ``user_id``. Returns (approval after the decision, None) or (None, refusal for the user), and
    returns only once the decision is durably recorded or refused: the caller answers Slack after this.

    A click carries the version and action hash it was shown: the decision binds to them in the store's one
    atomic step. It carries the digest of the view the card drew too (``view``): the view is checked to be the
    approval's current one and kept in the decision's audit entry. A command (``/hitl approve <id>``) binds to the
    current version and shows no view (its entry says so). The store refuses a decision that reaches it after
    ``ctx.answer_budget`` (``too_late``); when it refused it so, or has not answered a little after that, the person
    is told who decided when someone else did, else that nothing was recorded. Should a step that began in time
    still commit after that answer, ``late`` is called with it so the caller can correct what it said. The resume
    of a run waiting on the approval is queued after the answer; any replica's background loop picks it up.
    """
    window = AnswerWindow(by=time.time() + ctx.answer_budget)

    async def record() -> None:
        reviewer = await ctx.reviewers.reviewer(user_id)
        await ctx.lifecycle.decide(
            DecideRequest(
                approval_id,
                reviewer,
                kind,
                expected_version=version,
                expected_hash=action_hash,
                reason=reason,
                args=args,
                via="slack",
                view_digest=view,
                confirm=confirm,
            ),
            resume="queue",
            window=window,
            seen=ctx.notifier.cards.drawn(approval_id, version) if version is not None else None,
        )

    work = asyncio.ensure_future(record())
    first: set[asyncio.Future[Any]] = {work, window.recorded}
    await asyncio.wait(first, timeout=ctx.answer_budget, return_when="FIRST_COMPLETED")
    again: asyncio.Future[Approval | None] | None = None
    if not (work.done() or window.recorded.done()):
        # Past its window the store refuses this step: meanwhile read who decided (mostly a race was lost), so the
        # person hears that rather than "not recorded", and the read has the margin's time too.
        again = asyncio.ensure_future(_current(ctx, approval_id, within=_MARGIN + _REREAD))
        await asyncio.wait(first, timeout=_MARGIN, return_when="FIRST_COMPLETED")
    if window.recorded.done():
        _drop(again)
        ctx.later(work)  # the rest (trust grant, metrics, the resume job) goes on after Slack has its answer
        ctx.metrics.decided(window.recorded.result(), kind, ctx.clock.now())
        return window.recorded.result(), None
    if not work.done():
        log.warning(
            "the store did not record a decision on %s within %.1f s; told the reviewer", approval_id, ctx.answer_budget
        )
        ctx.later(_too_late(work, window, late))
        return None, await _unrecorded(ctx, approval_id, user_id, again)
    try:
        work.result()
    except EngineError as exc:
        if exc.code in _UNRECORDED:
            ctx.metrics.refusals.labels(code=str(exc.code)).inc()
            return None, await _unrecorded(ctx, approval_id, user_id, again)
        _drop(again)
        return None, await _refused(ctx, exc, approval_id, from_card=version is not None)
    raise AssertionError("a recorded decision marks its window")  # pragma: no cover - service invariant


async def _too_late(
    work: Awaitable[None], window: AnswerWindow, late: Callable[[Approval], Awaitable[None]] | None
) -> None:
    """A decision the person was told was not recorded: almost always the store refuses it (``too_late``) or
    fails; if a step that began in time committed after all, say so."""
    try:
        await work
    except EngineError:
        return
    if window.recorded.done():
        log.warning("a decision on %s committed after its reviewer was told it had not", window.recorded.result().id)
        if late is not None:
            await late(window.recorded.result())


async def _refused(ctx: BotContext, exc: EngineError, approval_id: str, *, from_card: bool) -> str:
    """What a refused decision is told; a card's (``from_card``: it carried the version a card showed) whose
    approval is no longer pending has that card drawn again too (:func:`redraw_stale`)."""
    if exc.code is not ErrorCode.NOT_FOUND:
        ctx.metrics.refusals.labels(code=str(exc.code)).inc()
    current = await _current(ctx, approval_id, within=_MARGIN) if exc.code is not ErrorCode.NOT_FOUND else None
    if from_card and current is not None:
        redraw_stale(ctx, current)
    return refusal_text(exc, current)


def redraw_stale(ctx: BotContext, current: Approval) -> None:
    """Queue the redraw of the card a click found out of date: its approval (``current``, as the store has it now)
    is no longer pending (decided, expired, withdrawn, replaced), yet the card offered a decision on it, so the
    update its change queued was lost (a process that could not queue it). Through the card-update job, after the
    clicker's answer; once: not when this process drew the card of that version already (a replayed click, a second
    click before the update lands). A refusal that leaves the approval pending (not eligible, a newer version,
    halted) leaves its card alone: that card is current, or its change's own update is on its way."""
    if current.status is Status.PENDING or ctx.notifier.cards.drawn(current.id, current.version) is not None:
        return
    redraw(ctx, current)


def redraw(ctx: BotContext, shown: Approval) -> None:
    """Queue the update of the card showing ``shown`` (a group card: all its members), after the answer: a job for
    the card-update worker, as a change queues. A failure to queue it is said; the next click tries again."""

    async def queue() -> None:
        try:
            await ctx.notifier.approval_changed(shown)
        except EngineError as exc:  # the refusal stands and is answered
            log.warning("could not queue the redraw of %s's out-of-date card (%s)", shown.id, exc.message)

    ctx.later(queue())


async def _unrecorded(
    ctx: BotContext, approval_id: str, user_id: str, again: asyncio.Future[Approval | None] | None
) -> str:
    """What a person whose decision the store did not record in time is told. Mostly they lost a race to someone
    whose step held the store up (two replicas on PostgreSQL, under load): the approval is read again (``again``,
    begun when the window closed; else now), and when someone else decided it they hear who and what, as an
    ``already_decided`` refusal says. Otherwise (still open, unreadable, or closed by a decision of theirs that a
    correction may yet confirm) nothing was recorded: a vote refused as too late is never shown as counted,
    whatever the approval shows now."""
    current = await (again if again is not None else _current(ctx, approval_id, within=_REREAD))
    closed = closed_refusal(current, user_id) if current is not None else None
    if closed is None or closed.context.get("winner") == user_id:
        return NOT_RECORDED
    return refusal_text(closed, current)


def _drop(read: asyncio.Future[Approval | None] | None) -> None:
    """A read begun for an answer that no longer needs it."""
    if read is not None:
        read.cancel()


async def _current(ctx: BotContext, approval_id: str, *, within: float) -> Approval | None:
    """The approval as the store has it now, or None when it cannot say within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            return await ctx.store.approvals.get(approval_id)
    except (EngineError, TimeoutError):
        return None


def late_text(a: Approval) -> str:
    """A correction: a decision the person was told was not recorded landed after all."""
    return f":information_source: Correction: your decision on `{a.id}` was recorded after all. {done_text(a)}"


def done_text(a: Approval | None) -> str:
    """What the decider is told after a recorded decision."""
    if a is None:
        return "Done."
    if a.is_open:
        return f":ballot_box_with_check: Vote recorded on `{a.id}`: {len(a.approvers)} of {a.quorum} approvals."
    note = practice_note(a) if is_practice(a) else None
    if note is not None:  # the decider alone learns it was practice, and whether they caught the defect
        return f":mortar_board: {label(note, 600)}"
    return f":white_check_mark: `{a.id}` ({label(a.tool, 60)}) is now *{a.status}*."
