"""Button clicks on review cards. Approve and Trust are answered only once their decision is recorded or refused
(recorded, then answered); the buttons that open a form are acked before their work (``BotContext.acked``).
Refusals reach only the clicker."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.context import BotContext
from hitl.bot.decisions import decide, done_text, late_text, redraw_stale, refusal_text
from hitl.bot.listeners.replies import BAD_VALUE, form_not_opened, refuse_button, tell
from hitl.bot.outbound.pacer import urgent
from hitl.bot.requests.button_values import parse_decision_value
from hitl.bot.requests.payloads import Action, Interaction, interaction
from hitl.bot.views.arguments import ACTION_FULL_VALUE, ALL_ARGUMENTS, parse_full_value
from hitl.bot.views.controls import (
    ACTION_ANSWER,
    ACTION_APPROVE,
    ACTION_APPROVE_CONFIRM,
    ACTION_FEEDBACK,
    ACTION_MODIFY,
    ACTION_OPEN_WEB,
    ACTION_REJECT,
    ACTION_TRUST,
    ACTION_VIEW_ALL,
)
from hitl.bot.views.full_value import ACTION_PAGE, full_value_view, parse_page
from hitl.bot.views.modals import (
    FORM_ANSWER,
    FORM_APPROVE,
    FORM_FEEDBACK,
    FORM_MODIFY,
    FORM_REJECT,
    answer_view,
    approve_view,
    modify_view,
    reason_view,
)
from hitl.engine.domain.decide import eligible
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.own_confirmation import askers
from hitl.engine.domain.practice import is_practice
from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["register_actions"]

log = logging.getLogger(__name__)
_EPHEMERAL: dict[str, Any] = {"response_type": "ephemeral", "replace_original": False}
_FORMS = {
    ACTION_MODIFY: FORM_MODIFY,
    ACTION_REJECT: FORM_REJECT,
    ACTION_FEEDBACK: FORM_FEEDBACK,
    ACTION_APPROVE_CONFIRM: FORM_APPROVE,
    ACTION_ANSWER: FORM_ANSWER,
}


def _click(req: Interaction) -> tuple[str, Action] | None:
    """The clicking user and the clicked element of a Block Kit click; None for anything else."""
    if req.type != "block_actions" or not req.actions:
        return None
    return req.user.id, req.actions[0]


def register_actions(app: AsyncApp, ctx: BotContext) -> None:
    """Register the card's buttons: Approve, Reject, Modify, Trust, feedback, view all."""

    async def on_approve(ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond) -> None:
        await _decide_click(ctx, DecisionKind.APPROVE, ack, interaction(context), respond)

    async def on_trust(ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond) -> None:
        await _decide_click(ctx, DecisionKind.TRUST, ack, interaction(context), respond)

    def opens(kind: str) -> Callable[..., Awaitable[None]]:
        """The listener for a button that opens a form (Bolt passes arguments by these parameter names)."""

        async def on_click(
            ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond, client: AsyncWebClient
        ) -> None:
            await _open_form(ctx, kind, interaction(context), respond, client)

        on_click.__name__ = f"on_{kind}"
        return on_click

    async def on_full_value(
        ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await _open_full_value(ctx, interaction(context), respond, client)

    async def on_page(ack: AsyncAck, context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await _turn_page(ctx, interaction(context), client)

    app.action(re.compile(f"^{re.escape(ACTION_FULL_VALUE)}:"))(ctx.acked(on_full_value))
    app.action(re.compile(f"^{re.escape(ACTION_PAGE)}:"))(ctx.acked(on_page))
    app.action(ACTION_APPROVE)(ctx.tracked(on_approve))
    app.action(ACTION_OPEN_WEB)(_opened)  # Slack opens the link itself; the click only needs its ack
    app.action(ACTION_TRUST)(ctx.tracked(on_trust))
    for kind in (ACTION_REJECT, ACTION_MODIFY, ACTION_FEEDBACK, ACTION_VIEW_ALL, ACTION_APPROVE_CONFIRM, ACTION_ANSWER):
        app.action(kind)(ctx.acked(opens(kind)))


async def _opened(ack: AsyncAck) -> None:
    await ack()


async def _decide_click(
    ctx: BotContext, kind: DecisionKind, ack: AsyncAck, req: Interaction, respond: AsyncRespond
) -> None:
    """Record the click's decision, then answer Slack; what the clicker is told goes after the answer."""
    try:
        click = _click(req)
        parsed = parse_decision_value(click[1].value or "") if click else None
        if click is None or parsed is None:
            await ack()
            ctx.later(refuse_button(ctx, req, f"{kind} click"))
            ctx.later(tell(respond, BAD_VALUE))
            return
        approval_id, version, action_hash, view = parsed

        async def correct(a: Approval) -> None:
            await tell(respond, late_text(a))

        updated, refusal = await decide(
            ctx, click[0], approval_id, kind, version=version, action_hash=action_hash, late=correct, view=view
        )
    except Exception:  # nothing is known to be recorded: say so, never fail silently
        log.exception("%s click failed", kind)
        await ack()
        ctx.later(tell(respond, ":warning: Something went wrong. Check the card before deciding again."))
        return
    await ack()
    ctx.later(ctx.looked(approval_id, click[0]))  # after the answer: counting never slows a decision
    if refusal is not None:
        ctx.later(tell(respond, refusal))
    elif req.container is not None and req.container.is_ephemeral:
        ctx.later(tell(respond, done_text(updated), replace_original=True))
    elif updated is not None and is_practice(updated) and not updated.is_open:
        ctx.later(tell(respond, done_text(updated)))  # the decider alone learns it was practice


async def _open_form(
    ctx: BotContext, kind: str, req: Interaction, respond: AsyncRespond, client: AsyncWebClient
) -> None:
    """Open the form a button names (Reject, Modify, feedback, view all) for someone who may use it."""
    try:
        click = _click(req)
        parsed = parse_decision_value(click[1].value or "") if click else None
        trigger = req.trigger_id
        if click is None or parsed is None or trigger is None:
            await refuse_button(ctx, req, f"{kind} click")
            await respond(text=BAD_VALUE, response_type="ephemeral", replace_original=False)
            return
        approval_id, version, digest, seen = parsed
        try:
            a = await ctx.store.approvals.get(approval_id)
        except EngineError as exc:
            await respond(text=refusal_text(exc, None), response_type="ephemeral", replace_original=False)
            return
        form = _FORMS.get(kind)
        if form is not None:
            redraw_stale(ctx, a)  # a form asked of a card whose approval is no longer pending: that card is stale
            # Only someone who may decide gets the form (a stranger's decision would be refused anyway).
            reviewer = await ctx.reviewers.reviewer(click[0])
            if not eligible(a, reviewer, ctx.clock.now()):
                code = ErrorCode.SELF_APPROVAL if reviewer.id in askers(a) else ErrorCode.NOT_ELIGIBLE
                await ctx.lifecycle.refused(a.id, click[0], code, f"opening the {form} form")
                await respond(text=refusal_text(EngineError("", code=code), a), **_EPHEMERAL)
                return
        meta = ctx.signer.dumps(
            {
                "id": a.id,
                "v": version,
                "h": digest,
                "d": seen,
                "u": click[0],
                "k": form or "view",
                "r": req.response_url,
            }
        )
        if kind == ACTION_VIEW_ALL:  # a batch's every item: its arguments in full, paged, bound to this version
            view = full_value_view(a, ALL_ARGUMENTS, 0, version=version, action_hash=digest)
        elif kind == ACTION_ANSWER:
            view = answer_view(a, ctx.schema_for(a), meta)
        elif kind == ACTION_MODIFY:
            view = modify_view(a, ctx.schema_for(a), meta, declared=ctx.config.declared_schema(a.tool))
        elif kind == ACTION_APPROVE_CONFIRM:
            view = approve_view(
                a,
                meta,
                view=ctx.notifier.cards.view_of(a) if ctx.notifier.cards.view_of else None,
                declared=ctx.config.declared_schema(a.tool),
            )
        else:
            required = a.reason_required
            view = reason_view(a, meta, feedback=kind == ACTION_FEEDBACK, required=required)
        # The trigger expires 3 s after the click: open the modal before anything slow, and ahead of any backlog.
        with urgent():
            await client.views_open(trigger_id=trigger, view=view)
        await ctx.looked(a.id, click[0])
    except Exception as exc:
        await form_not_opened(respond, exc, log=log, opening="a modal")


async def _open_full_value(ctx: BotContext, req: Interaction, respond: AsyncRespond, client: AsyncWebClient) -> None:
    """Open one argument in full (first page), as of the version and hash the clicked card was drawn for. Reading
    changes nothing, so anyone who sees the card may; a tampered button is audited like any other."""
    try:
        click = _click(req)
        parsed = parse_full_value(click[1].value or "") if click else None
        if click is None or parsed is None or req.trigger_id is None:
            await refuse_button(ctx, req, "show-in-full click")
            await tell(respond, BAD_VALUE)
            return
        approval_id, version, digest, index = parsed
        a = await ctx.store.approvals.get(approval_id)
        reviewer = await ctx.reviewers.reviewer(click[0])
        if click[0] != a.requester and not eligible(a, reviewer, ctx.clock.now()):
            # As /hitl show: a value in full is for the people who decide (and the requester), not the workspace.
            await ctx.lifecycle.refused(a.id, click[0], ErrorCode.NOT_ELIGIBLE, "showing a value in full")
            await respond(text=refusal_text(EngineError("", code=ErrorCode.NOT_ELIGIBLE), a), **_EPHEMERAL)
            return
        view = full_value_view(
            a, index, 0, version=version, action_hash=digest, declared=ctx.config.declared_schema(a.tool)
        )
        with urgent():  # its trigger expires in 3 s
            await client.views_open(trigger_id=req.trigger_id, view=view)
        await ctx.looked(a.id, click[0])
    except EngineError as exc:
        await tell(respond, refusal_text(exc, None))
    except SlackApiError as exc:
        log.warning("views.open failed: %s", exc.response.get("error"))
        await tell(respond, f":warning: Could not open the value (Slack said {exc.response.get('error')}).")
    except Exception:
        log.exception("opening a value in full failed")
        await tell(respond, ":warning: Something went wrong opening the value. Try again.")


async def _turn_page(ctx: BotContext, req: Interaction, client: AsyncWebClient) -> None:
    """Show another page of a value in its open view, bound to the same version and hash (a changed approval
    shows that it changed instead)."""
    try:
        click = _click(req)
        parsed = parse_page(click[1].value or "") if click else None
        view_id = str(getattr(req.view, "id", "") or "") if req.view is not None else ""
        if click is None or parsed is None or not view_id:
            await refuse_button(ctx, req, "page click")
            return
        approval_id, version, digest, index, page = parsed
        a = await ctx.store.approvals.get(approval_id)
        view = full_value_view(
            a, index, page, version=version, action_hash=digest, declared=ctx.config.declared_schema(a.tool)
        )
        await client.views_update(view_id=view_id, view=view)
    except Exception:
        log.exception("turning a value's page failed")
