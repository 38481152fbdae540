"""A group card's buttons: Approve all, Reject all (its reason form), View all (and its pages), and each member's
Open, which shows that member's own card, every control included, to the person who clicked."""

from __future__ import annotations

import logging

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.context import BotContext
from hitl.bot.errors import BotError
from hitl.bot.group_decisions import decide_group, group_members
from hitl.bot.listeners.replies import BAD_VALUE, refuse_button, tell
from hitl.bot.outbound.pacer import urgent
from hitl.bot.requests.button_values import parse_button_value
from hitl.bot.requests.payloads import Interaction, interaction
from hitl.bot.views.blocks import card_text
from hitl.bot.views.group_cards import (
    ACTION_GROUP_APPROVE,
    ACTION_GROUP_OPEN,
    ACTION_GROUP_PAGE,
    ACTION_GROUP_REJECT,
    ACTION_GROUP_VIEW,
    member_list_view,
    parse_group_value,
    parse_page_value,
)
from hitl.bot.views.modals import CALLBACK_GROUP_REJECT, FORM_GROUP_REJECT, form_value, group_reason_view
from hitl.engine.domain.models import DecisionKind
from hitl.engine.errors import EngineError

__all__ = ["register_groups"]

log = logging.getLogger(__name__)


def register_groups(app: AsyncApp, ctx: BotContext) -> None:
    """Register a group card's buttons and its Reject all form."""

    async def on_approve_all(ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond) -> None:
        await _approve_all(ctx, interaction(context), respond)

    async def on_reject_all(
        ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await _open_reject_all(ctx, interaction(context), respond, client)

    async def on_reject_submitted(ack: AsyncAck, context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await _reject_all_submitted(ctx, interaction(context), ack, client)

    async def on_view_all(ack: AsyncAck, context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await _view_all(ctx, interaction(context), client)

    async def on_page(ack: AsyncAck, context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await _turn_page(ctx, interaction(context), client)

    async def on_open(ack: AsyncAck, context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await _open_member(ctx, interaction(context), client)

    app.action(ACTION_GROUP_APPROVE)(ctx.acked(on_approve_all))
    app.action(ACTION_GROUP_REJECT)(ctx.acked(on_reject_all))
    app.action(ACTION_GROUP_VIEW)(ctx.acked(on_view_all))
    app.action(ACTION_GROUP_PAGE)(ctx.acked(on_page))
    app.action(ACTION_GROUP_OPEN)(ctx.acked(on_open))
    app.view(CALLBACK_GROUP_REJECT)(ctx.tracked(on_reject_submitted))


async def _approve_all(ctx: BotContext, req: Interaction, respond: AsyncRespond) -> None:
    parsed = _group_click(req)
    if parsed is None:
        await refuse_button(ctx, req, "approve-all click")
        await tell(respond, BAD_VALUE)
        return
    out = await decide_group(ctx, req.user.id, *parsed, DecisionKind.APPROVE)
    await tell(respond, out.text())  # after every member's decision is recorded


async def _open_reject_all(ctx: BotContext, req: Interaction, respond: AsyncRespond, client: AsyncWebClient) -> None:
    """Reject all's reason form, for the members still pending."""
    parsed = _group_click(req)
    if parsed is None or req.trigger_id is None:
        await refuse_button(ctx, req, "reject-all click")
        await tell(respond, BAD_VALUE)
        return
    members = await group_members(ctx, parsed[0])
    if members is None:  # the value's first member names no group card
        await refuse_button(ctx, req, "reject-all click")
        await tell(respond, BAD_VALUE)
        return
    pending = [a for a in members if a.is_open]
    if not pending:
        await tell(respond, ":lock: Nothing on this card is pending any more.")
        return
    meta = ctx.signer.dumps({"g": parsed[0], "d": parsed[1], "u": req.user.id, "k": FORM_GROUP_REJECT})
    required = any(a.reason_required for a in pending)
    view = group_reason_view(len(pending), pending[0].tool, meta, required=required)
    with urgent():  # the trigger expires 3 s after the click
        await client.views_open(trigger_id=req.trigger_id, view=view)


async def _reject_all_submitted(ctx: BotContext, req: Interaction, ack: AsyncAck, client: AsyncWebClient) -> None:
    """Reject all's form sent: the form closes at once, and what was recorded is told once it is."""
    try:
        meta = ctx.signer.loads(req.view.private_metadata if req.view else "")
    except BotError:
        meta = {}
    if meta.get("k") != FORM_GROUP_REJECT or meta.get("u") != req.user.id:
        await ctx.lifecycle.refused(str(meta.get("g", ""))[:20], req.user.id, "form_tampered", "reject-all form")
        await ack(response_action="errors", errors={"hitl_reason": "This form was altered; nothing changed."})
        return
    entered = form_value(req.view.state.values if req.view else {}, "hitl_reason")
    reason = entered if isinstance(entered, str) and entered.strip() else None
    leader, digest = str(meta["g"]), str(meta["d"])
    if reason is None:  # a group that needs a reason is told so under the reason, in a reviewer's words
        pending = [a for a in await group_members(ctx, leader) or [] if a.is_open]
        if any(a.reason_required for a in pending):
            why = f"A reason is needed to reject these {len(pending)} requests: say why they should not run."
            await ack(response_action="errors", errors={"hitl_reason": why})
            return
    await ack()  # the form closes; what was recorded is told once it is (a group can outlast Slack's 3 s)

    async def record() -> None:
        out = await decide_group(ctx, req.user.id, leader, digest, DecisionKind.REJECT, reason=reason)
        ref = await ctx.store.messages.get(leader)
        if ref is not None:
            await client.chat_postEphemeral(channel=ref.channel, user=req.user.id, text=out.text())

    ctx.later(record())


async def _view_all(ctx: BotContext, req: Interaction, client: AsyncWebClient) -> None:
    parsed = _group_click(req)
    members = await group_members(ctx, parsed[0]) if parsed else None
    if not members or req.trigger_id is None:
        await refuse_button(ctx, req, "view-all click")
        return
    with urgent():  # the trigger expires 3 s after the click
        await client.views_open(
            trigger_id=req.trigger_id,
            view=member_list_view(members, 0, view_of=ctx.notifier.cards.view_of, page_of=ctx.notifier.cards.page_of),
        )


async def _turn_page(ctx: BotContext, req: Interaction, client: AsyncWebClient) -> None:
    parsed = parse_page_value(req.actions[0].value or "") if req.actions else None
    view_id = str(getattr(req.view, "id", "") or "") if req.view is not None else ""
    members = await group_members(ctx, parsed[0]) if parsed else None
    if parsed is None or not members or not view_id:
        await refuse_button(ctx, req, "group page click")
        return
    cards = ctx.notifier.cards
    view = member_list_view(members, parsed[1], view_of=cards.view_of, page_of=cards.page_of)
    await client.views_update(view_id=view_id, view=view)


async def _open_member(ctx: BotContext, req: Interaction, client: AsyncWebClient) -> None:
    """The member's own card, only for the person who clicked (``chat.postEphemeral``: its buttons decide it
    as a card's do, bound to its version, hash and view)."""
    parsed = parse_button_value(req.actions[0].value or "") if req.actions else None
    if parsed is None:
        await refuse_button(ctx, req, "open-member click")
        return
    try:
        a = await ctx.store.approvals.get(parsed[0])
        ref = await ctx.store.messages.get(a.id)
    except EngineError as exc:
        log.warning("could not open %s: %s", parsed[0], exc)
        return
    if ref is None:
        return
    blocks = ctx.notifier.cards.card(a, now=ctx.clock.now(), halt=await ctx.notifier.halt_of(a))
    await client.chat_postEphemeral(channel=ref.channel, user=req.user.id, text=card_text(a), blocks=blocks)
    await ctx.looked(a.id, req.user.id)


def _group_click(req: Interaction) -> tuple[str, str] | None:
    if req.type != "block_actions" or not req.actions:
        return None
    return parse_group_value(req.actions[0].value or "")
