"""Withdraw on a decided card: a decider of the approval gets the form that asks why (anyone else is told it is not
theirs, and the refusal is audited); its submission withdraws through the one withdrawal path the API and the CLI
take (:func:`hitl.engine.receipts.withdrawing.withdraw_approval`: the store's atomic step against any redeem, then
the audit entry), and is answered only once that is recorded or refused. The card is then drawn again explicitly:
a withdrawal makes no new version of the approval."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.context import BotContext
from hitl.bot.decisions import NOT_RECORDED, refusal_text
from hitl.bot.listeners.replies import BAD_VALUE, form_not_opened, refuse_button, tell
from hitl.bot.listeners.views import form_meta
from hitl.bot.outbound.pacer import urgent
from hitl.bot.requests.button_values import parse_button_value
from hitl.bot.requests.payloads import Interaction, interaction
from hitl.bot.views.modals import form_value
from hitl.bot.views.withdrawal import ACTION_WITHDRAW, CALLBACK_WITHDRAW, FORM_WITHDRAW, withdraw_view
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.receipts.withdrawing import REASON_MAX, WithdrawRequest, may_withdraw, withdraw_approval

__all__ = ["NOT_YOURS", "register_withdrawals"]

log = logging.getLogger(__name__)

NOT_YOURS = (
    ":no_entry: This is not yours to withdraw: only a person who decided it may. Nothing changed; your click is in "
    "the audit trail."
)
"""What someone who did not decide an approval is told when they press its Withdraw."""
_WORDS = {
    ErrorCode.INVALID_INPUT: f"Say why it must not be acted on: 1 to {REASON_MAX} characters, no control characters.",
    ErrorCode.NOT_ELIGIBLE: "This is not yours to withdraw: only a person who decided it may. Nothing changed.",
    ErrorCode.RECEIPT_SPENT: (
        "Not withdrawn: its receipt was spent first, so the protected system may have acted on it. Undo it there."
    ),
    ErrorCode.STALE_VERSION: "This approval changed since this card was shown. Use the updated card.",
}
"""A refused withdrawal in a reviewer's words, under the reason's input (a modal's errors are plain text)."""


def register_withdrawals(app: AsyncApp, ctx: BotContext) -> None:
    """Register the decided card's Withdraw button and its form's submission."""

    async def on_withdraw(
        ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await _open(ctx, interaction(context), respond, client)

    async def on_submit(ack: AsyncAck, context: AsyncBoltContext) -> None:
        await _submitted(ctx, ack, interaction(context))

    app.action(ACTION_WITHDRAW)(ctx.acked(on_withdraw))
    app.view(CALLBACK_WITHDRAW)(ctx.tracked(on_submit))


async def _open(ctx: BotContext, req: Interaction, respond: AsyncRespond, client: AsyncWebClient) -> None:
    """Open the withdrawal form for a decider of the approval; refuse (and audit) anyone else."""
    try:
        user = req.user.id
        value = req.actions[0].value if req.type == "block_actions" and req.actions else None
        parsed = parse_button_value(value or "")
        if parsed is None or req.trigger_id is None:
            await refuse_button(ctx, req, "withdraw click")
            await tell(respond, BAD_VALUE)
            return
        approval_id, version, digest = parsed
        try:
            a = await ctx.store.approvals.get(approval_id)
        except EngineError as exc:
            await tell(respond, refusal_text(exc, None))
            return
        reviewer = await ctx.reviewers.reviewer(user)
        if not any(reviewer.id in d.voters for d in a.decisions):
            await ctx.lifecycle.refused(a.id, user, ErrorCode.NOT_ELIGIBLE, "opening the withdraw form")
            await tell(respond, NOT_YOURS)
            return
        if ctx.config.receipts is None or not may_withdraw(a, reviewer.id):
            await tell(
                respond, f":information_source: `{a.id}` is {a.status}: no receipt of it can be out to withdraw."
            )
            return
        meta = {"id": a.id, "v": version, "h": digest, "u": user, "k": FORM_WITHDRAW, "r": req.response_url}
        with urgent():  # the trigger expires 3 s after the click: ahead of any backlog
            await client.views_open(trigger_id=req.trigger_id, view=withdraw_view(a, ctx.signer.dumps(meta)))
    except Exception as exc:
        await form_not_opened(respond, exc, log=log, opening="the withdrawal form")


async def _submitted(ctx: BotContext, ack: AsyncAck, req: Interaction) -> None:
    """Withdraw as the form's submitter, bound to the approval and action hash the card showed (at its version or a
    later one); answered once the withdrawal is recorded or refused, within the answer budget (Slack's 3 s)."""
    meta = await form_meta(ctx, req, FORM_WITHDRAW)
    if meta is None:
        await ack(response_action="errors", errors={"hitl_reason": "This form was altered; nothing changed."})
        return
    entered = form_value(req.view.state.values if req.view else {}, "hitl_reason")
    work = asyncio.ensure_future(_withdraw(ctx, meta, req.user.id, entered if isinstance(entered, str) else ""))
    done, _ = await asyncio.wait({work}, timeout=ctx.answer_budget)
    if not done:  # still going: it may yet be recorded (the card will say so); never said to be done
        ctx.later(_quiet(work))
        await ack(response_action="errors", errors={"hitl_reason": _plain(NOT_RECORDED)})
        return
    try:
        refusal = work.result()
    except Exception:
        log.exception("a withdrawal failed")
        refusal = "Something went wrong: check the card before withdrawing again."
    if refusal is None:
        await ack()
    else:
        await ack(response_action="errors", errors={"hitl_reason": refusal})


async def _withdraw(ctx: BotContext, meta: dict[str, Any], user: str, reason: str) -> str | None:
    """The withdrawal itself; None when recorded, else what the person is told. Either way the card is queued to
    be drawn again (withdrawn, or its receipt spent): a withdrawal makes no new version to trigger it."""
    approval_id = str(meta["id"])
    a: Approval | None = None
    try:
        a = await ctx.store.approvals.get(approval_id)
        # Bound to the action the card showed; a later version by its execution's progress alone (executing,
        # executed) changes nothing a withdrawal is about, so the form opened on the approved card still holds.
        if a.action_hash != str(meta["h"]) or a.version < int(meta["v"]):
            await ctx.lifecycle.refused(a.id, user, ErrorCode.STALE_VERSION, "withdraw form of another action")
            return _WORDS[ErrorCode.STALE_VERSION]
        reviewer = await ctx.reviewers.reviewer(user)
        await withdraw_approval(ctx.store, ctx.clock, WithdrawRequest(a.id, reviewer.id, "slack", reason))
    except EngineError as exc:
        if exc.code is ErrorCode.RECEIPT_SPENT and a is not None:  # lost to a redeem: the card says it was spent
            await _redraw(ctx, a)
        if exc.code is ErrorCode.ILLEGAL_TRANSITION:
            return f"Nothing of {approval_id} can be withdrawn now: no receipt of it can be out."
        return _WORDS.get(exc.code) or _plain(refusal_text(exc, None))
    await _redraw(ctx, a)
    return None


async def _redraw(ctx: BotContext, a: Approval) -> None:
    """Queue ``a``'s card to be drawn again as its trail now stands (durably, before the answer)."""
    await ctx.notifier.updates.changed(a)


async def _quiet(work: asyncio.Future[str | None]) -> None:
    """A withdrawal that outlived its answer: finished, its errors logged."""
    try:
        await work
    except Exception:
        log.exception("a withdrawal failed after its answer")


def _plain(text: str) -> str:
    """Modal errors are plain text: drop emoji codes and mrkdwn marks."""
    words = [w for w in text.split() if not (w.startswith(":") and w.endswith(":"))]
    return " ".join(words).replace("*", "")[:150]
