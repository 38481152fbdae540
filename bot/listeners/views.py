"""Modal submissions: Modify (schema-checked, inline errors), Approve (the typed values, the reason), Reject (reason),
Feedback, a question's Answer."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from hitl.bot.context import BotContext
from hitl.bot.decisions import decide
from hitl.bot.errors import BotError
from hitl.bot.requests.payloads import Interaction, interaction
from hitl.bot.views.form_errors import attention_errors, reason_errors
from hitl.bot.views.modals import (
    ANSWER_BLOCK,
    CALLBACK_ANSWER,
    CALLBACK_APPROVE,
    CALLBACK_FEEDBACK,
    CALLBACK_MODIFY,
    CALLBACK_REJECT,
    FORM_ANSWER,
    FORM_APPROVE,
    FORM_FEEDBACK,
    FORM_MODIFY,
    FORM_REJECT,
    FormValues,
    attended_values,
    form_value,
    parse_modify,
)
from hitl.engine.domain.models import DecisionKind

__all__ = ["form_meta", "register_views"]

log = logging.getLogger(__name__)


async def _meta(ctx: BotContext, req: Interaction, form: str) -> dict[str, Any] | None:
    """The form's signed metadata, if it is intact, was opened as this kind of form, and is submitted by the
    person it was opened for. Every other submission is refused and audited."""
    user = req.user.id
    try:
        meta = ctx.signer.loads(req.view.private_metadata if req.view else "")
    except BotError:
        await ctx.lifecycle.refused("", user, "form_tampered", f"{form} form with altered metadata")
        return None
    approval_id = str(meta.get("id", ""))
    if meta.get("k") != form:
        # A reject form submitted under the feedback callback (or any other swap) must not decide anything.
        await ctx.lifecycle.refused(approval_id, user, "form_kind_mismatch", f"{meta.get('k')} form sent as {form}")
        return None
    if meta.get("u") != user:
        await ctx.lifecycle.refused(approval_id, user, "foreign_submitter", f"{form} form opened by {meta.get('u')}")
        return None
    return meta


form_meta = _meta
"""A form's signed metadata, checked as every form's is (the withdrawal form's listener reads it too)."""


def _seen(meta: dict[str, Any]) -> str | None:
    """The digest of the view the card that opened the form drew (None: a card drawn before cards carried one)."""
    seen = meta.get("d")
    return seen if isinstance(seen, str) else None


def _values(req: Interaction) -> FormValues:
    return req.view.state.values if req.view else {}


async def _approving(ctx: BotContext, kind: DecisionKind, form: str, ack: AsyncAck, req: Interaction) -> None:
    """Modify or Approve through its form: the edit (Modify), the values typed and the reason go to the engine,
    which checks them. Every wrong field is told at once, under its own input (:mod:`form_errors`); a refusal
    that is about no one field (a changed card, a halt) goes under the first."""
    meta = await _meta(ctx, req, form)
    if meta is None:
        await ack(response_action="errors", errors=_first_field(req, "This form was altered; nothing changed."))
        return
    errors: dict[str, str] = {}
    try:
        a = await ctx.store.approvals.get(str(meta["id"]))
        args = None
        typed, reason = attended_values(_values(req), a)
        if kind is DecisionKind.MODIFY:
            args, errors = parse_modify(_values(req), ctx.schema_for(a))
            runs_with = None if errors else {**a.execute_args, **(args or {})}
            errors = {**errors, **attention_errors(a, typed, reason, runs_with)}
            if runs_with is None:  # the edit itself is wrong: nothing to send the engine
                await ack(response_action="errors", errors=errors)
                return
        else:
            errors = attention_errors(a, typed, reason, a.execute_args)
        # Sent even when a field is wrong: the engine refuses it (it checks the same things) and audits that.
        _, refusal = await decide(
            ctx,
            req.user.id,
            a.id,
            kind,
            version=int(meta["v"]),
            action_hash=str(meta["h"]),
            args=args,
            reason=reason,
            view=_seen(meta),
            confirm=typed,
        )
    except Exception:
        log.exception("%s submission failed", kind)
        errors, refusal = {}, "Something went wrong. Check the card before deciding again."
    if refusal:
        await ack(response_action="errors", errors=errors or _first_field(req, _plain(refusal)))
    else:
        await ack()


async def _answering(ctx: BotContext, ack: AsyncAck, req: Interaction) -> None:
    """A question's answer: recorded through the decide path as an edit that adds ``answer`` to the question (the
    engine checks it against the question's schema, its length included, with the version and action hash the card
    showed), so it is recorded once and audited as any decision."""
    meta = await _meta(ctx, req, FORM_ANSWER)
    if meta is None:
        await ack(response_action="errors", errors={ANSWER_BLOCK: "This form was altered; nothing changed."})
        return
    entered = form_value(_values(req), ANSWER_BLOCK)
    if not isinstance(entered, str) or not entered.strip():
        await ack(response_action="errors", errors={ANSWER_BLOCK: "Type an answer, or close this and Decline."})
        return
    try:
        a = await ctx.store.approvals.get(str(meta["id"]))
        _, refusal = await decide(
            ctx,
            req.user.id,
            a.id,
            DecisionKind.MODIFY,
            version=int(meta["v"]),
            action_hash=str(meta["h"]),
            args={**a.execute_args, "answer": entered},
            view=_seen(meta),
        )
    except Exception:
        log.exception("answer submission failed")
        refusal = "Something went wrong. Check the card before answering again."
    if refusal:
        await ack(response_action="errors", errors={ANSWER_BLOCK: _plain(refusal)})
    else:
        await ack()


def register_views(app: AsyncApp, ctx: BotContext) -> None:
    """Register the modal forms' submissions (Modify, Approve with what it asks, Reject with a reason, feedback)."""

    async def on_modify(ack: AsyncAck, context: AsyncBoltContext) -> None:
        await _approving(ctx, DecisionKind.MODIFY, FORM_MODIFY, ack, interaction(context))

    async def on_approve(ack: AsyncAck, context: AsyncBoltContext) -> None:
        """Approve through its form: the values typed and the reason go to the engine, which compares them."""
        await _approving(ctx, DecisionKind.APPROVE, FORM_APPROVE, ack, interaction(context))

    async def reason_submitted(kind: DecisionKind, ack: AsyncAck, req: Interaction) -> None:
        meta = await _meta(ctx, req, FORM_FEEDBACK if kind is DecisionKind.FEEDBACK else FORM_REJECT)
        if meta is None:
            await ack(response_action="errors", errors={"hitl_reason": "This form was altered; nothing changed."})
            return
        entered = form_value(_values(req), "hitl_reason")
        reason = entered if isinstance(entered, str) and entered else None
        errors: dict[str, str] = {}
        try:
            if not (reason or "").strip():  # said in a reviewer's words; the engine still refuses and audits it
                errors = reason_errors(await ctx.store.approvals.get(str(meta["id"])), kind, reason)
            _, refusal = await decide(
                ctx,
                req.user.id,
                str(meta["id"]),
                kind,
                version=int(meta["v"]),
                action_hash=str(meta["h"]),
                reason=reason,
                view=_seen(meta),
            )
        except Exception:
            log.exception("%s submission failed", kind)
            refusal = "Something went wrong. Check the card before deciding again."
        if refusal:
            await ack(response_action="errors", errors=errors or {"hitl_reason": _plain(refusal)})
        else:
            await ack()

    async def on_reject(ack: AsyncAck, context: AsyncBoltContext) -> None:
        await reason_submitted(DecisionKind.REJECT, ack, interaction(context))

    async def on_feedback(ack: AsyncAck, context: AsyncBoltContext) -> None:
        await reason_submitted(DecisionKind.FEEDBACK, ack, interaction(context))

    async def on_answer(ack: AsyncAck, context: AsyncBoltContext) -> None:
        await _answering(ctx, ack, interaction(context))

    app.view(CALLBACK_ANSWER)(ctx.tracked(on_answer))
    app.view(CALLBACK_MODIFY)(ctx.tracked(on_modify))
    app.view(CALLBACK_APPROVE)(ctx.tracked(on_approve))
    app.view(CALLBACK_REJECT)(ctx.tracked(on_reject))
    app.view(CALLBACK_FEEDBACK)(ctx.tracked(on_feedback))


def _first_field(req: Interaction, message: str) -> dict[str, str]:
    blocks = req.view.blocks if req.view else []
    block_id = next((b.block_id for b in blocks if b.type == "input" and b.block_id), "hitl_reason")
    return {block_id: message}


def _plain(text: str) -> str:
    """Modal errors are plain text: drop emoji codes and mrkdwn marks from refusal words."""
    words = [w for w in text.split() if not (w.startswith(":") and w.endswith(":"))]
    return " ".join(words).replace("*", "")[:150]
