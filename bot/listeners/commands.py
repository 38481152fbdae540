"""``/hitl`` slash commands: pending, approve, reject, show, trust list|revoke, help."""

from __future__ import annotations

import logging
import shlex
from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.blocks import card, who
from bot.context import BotContext
from bot.decisions import decide, done_text, refusal_text
from bot.escape import label
from engine.domain.models import DecisionKind
from engine.errors import EngineError

__all__ = ["USAGE", "register_commands"]

log = logging.getLogger("hitl.bot")

USAGE = (
    "*hitl* — human approval for agent actions\n"
    "• `/hitl pending` — what you can decide\n"
    "• `/hitl approve <id>` — approve\n"
    "• `/hitl reject <id> [reason]` — reject\n"
    "• `/hitl show <id>` — the full request\n"
    "• `/hitl trust list [session]` — tools trusted for a session\n"
    "• `/hitl trust revoke <tool> [session]` — stop trusting a tool\n"
    "• `/hitl help` — this message"
)
PAGE = 8


def register_commands(app: AsyncApp, ctx: BotContext) -> None:
    async def on_hitl(ack: Any, body: dict[str, Any], respond: Any) -> None:
        await ack()
        user = str(body.get("user_id") or "")
        try:
            words = shlex.split(str(body.get("text") or ""))
        except ValueError:
            words = str(body.get("text") or "").split()
        try:
            reply = await _dispatch(ctx, user, words)
        except Exception:
            log.exception("/hitl %s failed", words[:1])
            reply = {"text": ":warning: Something went wrong; nothing was recorded. Try again."}
        try:
            await respond(response_type="ephemeral", **reply)
        except Exception:
            log.exception("could not answer /hitl")

    app.command("/hitl")(on_hitl)


async def _dispatch(ctx: BotContext, user: str, words: list[str]) -> dict[str, Any]:
    if not user:
        return {"text": USAGE}
    cmd, rest = (words[0].lower(), words[1:]) if words else ("help", [])
    if cmd == "pending":
        return await _pending(ctx, user)
    if cmd in ("approve", "reject", "show") and not rest:
        return {
            "text": f":grey_question: `/hitl {cmd}` needs an approval id, e.g. `/hitl {cmd} apr_7KQ2M9XW3A`.\n{USAGE}"
        }
    if cmd == "approve":
        updated, refusal = await decide(ctx, user, rest[0], DecisionKind.APPROVE, version=None, action_hash=None)
        return {"text": refusal or done_text(updated)}
    if cmd == "reject":
        reason = " ".join(rest[1:]) or None
        updated, refusal = await decide(
            ctx, user, rest[0], DecisionKind.REJECT, version=None, action_hash=None, reason=reason
        )
        return {"text": refusal or done_text(updated)}
    if cmd == "show":
        try:
            a = await ctx.store.get_approval(rest[0])
        except EngineError as exc:
            return {"text": refusal_text(exc, None)}
        return {"text": f"{a.id}: {a.tool}", "blocks": card(a, now=ctx.service.clock.now())}
    if cmd == "trust":
        return await _trust(ctx, user, rest)
    if cmd == "help":
        return {"text": USAGE}
    return {"text": f":grey_question: Unknown command `{label(cmd, 30)}`.\n{USAGE}"}


async def _pending(ctx: BotContext, user: str) -> dict[str, Any]:
    reviewer = await ctx.directory.reviewer(user)
    if not reviewer.roles:
        return {"text": ":information_source: You are not a reviewer in any role, so there is nothing for you."}
    page = await ctx.store.list_pending(roles=sorted(reviewer.roles), exclude_requester=user, limit=PAGE + 10)
    mine = [a for a in page.items if user not in a.approvers][:PAGE]
    if not mine:
        return {"text": ":tada: Nothing is waiting for you."}
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{len(mine)} waiting for you*"}}
    ]
    now = ctx.service.clock.now()
    for a in mine:
        compact = [b for b in card(a, now=now) if b["type"] in ("header", "section", "actions")][:5]
        blocks += [{"type": "divider"}, *compact]
    if len(blocks) > 50:
        blocks = blocks[:50]
    noun = "approval is" if len(mine) == 1 else "approvals are"
    return {"text": f"{len(mine)} {noun} waiting for you", "blocks": blocks}


async def _trust(ctx: BotContext, user: str, rest: list[str]) -> dict[str, Any]:
    now = ctx.service.clock.now()
    sub = rest[0].lower() if rest else "list"
    if sub == "list":
        grants = (
            await ctx.store.list_trust(rest[1], now=now) if len(rest) > 1 else await ctx.store.list_all_trust(now=now)
        )
        if not grants:
            return {"text": "No tool is trusted right now."}
        lines = [f"• `{label(g.tool, 60)}` in `{label(g.session_id, 60)}` by {who(g.granted_by)}" for g in grants[:40]]
        return {"text": "*Trusted tools*\n" + "\n".join(lines)}
    if sub == "revoke" and len(rest) >= 2:
        reviewer = await ctx.directory.reviewer(user)
        if not reviewer.roles:
            return {"text": ":no_entry: Only reviewers can revoke trust."}
        tool = rest[1]
        sessions = (
            [rest[2]]
            if len(rest) > 2
            else sorted({g.session_id for g in await ctx.store.list_all_trust(now=now) if g.tool == tool})
        )
        revoked = [s for s in sessions if await ctx.store.revoke_trust(s, tool, by=user, now=now)]
        if not revoked:
            return {"text": f"`{label(tool, 60)}` was not trusted anywhere."}
        return {"text": f":lock: `{label(tool, 60)}` is no longer trusted in {len(revoked)} session(s)."}
    return {"text": f":grey_question: Try `/hitl trust list` or `/hitl trust revoke <tool> [session]`.\n{USAGE}"}
