"""``/hitl`` slash commands: pending, approve, reject, show, trust list|revoke, halt, unhalt, halts, delegate,
delegations, run, help."""

from __future__ import annotations

import logging
import shlex
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond

from hitl.bot.context import BotContext
from hitl.bot.decisions import decide, done_text, refusal_text
from hitl.bot.listeners.delegate import delegate_command, delegations_text
from hitl.bot.listeners.slack_runs import run_command
from hitl.bot.requests.payloads import command, interaction
from hitl.bot.views.blocks import card, when, who
from hitl.bot.views.escape import label
from hitl.bot.views.queue import queue_entry
from hitl.engine.domain.decide import eligible, may_vote
from hitl.engine.domain.halts import EVERY_TOOL
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.ranking import waiting_text
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.storage.queue import queue_page

__all__ = ["ACTION_PENDING_PAGE", "USAGE", "pending_page", "register_commands"]

log = logging.getLogger(__name__)

USAGE = (
    "*hitl* — human approval for agent actions\n"
    "• `/hitl pending` — what you can decide\n"
    "• `/hitl approve <id>` — approve\n"
    "• `/hitl reject <id> [reason]` — reject\n"
    "• `/hitl show <id>` — the full request\n"
    "• `/hitl trust list [session]` — tools trusted for a session\n"
    "• `/hitl trust revoke <tool> [session]` — stop trusting a tool\n"
    "• `/hitl halt <tool|all> [reason]` — stop the system: nothing new of it runs (admins)\n"
    "• `/hitl unhalt <tool|all>` — lift a halt and resume what it paused (admins)\n"
    "• `/hitl halts` — what is halted\n"
    "• `/hitl delegate @person until <YYYY-MM-DD> [role]` — hand your roles on while you are away (≤ 30 days)\n"
    "• `/hitl delegate end` — end your delegation now\n"
    "• `/hitl delegations` — the delegations you gave or were handed\n"
    "• `/hitl run <workflow> [key=value ...]` — start a registered workflow, acting for you (`slack.run_role`)\n"
    "• `/hitl help` — this message"
)
PAGE = 8
_DECISIONS = frozenset({"approve", "reject", "halt", "unhalt", "delegate"})
ACTION_PENDING_PAGE = "hitl_pending_page"


def register_commands(app: AsyncApp, ctx: BotContext) -> None:
    """Register ``/hitl`` and its subcommands."""

    async def on_hitl(ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond) -> None:
        req = command(context)
        user = req.user_id
        try:
            words = shlex.split(req.text)
        except ValueError:
            words = req.text.split()
        if words and words[0].lower() == "run" and user:
            # Refused or recorded, then answered; the run itself starts after the answer (it may outlast Slack's 3 s).
            reply, begin = await run_command(ctx, user, words[1:], request=req.trigger_id)
            await ack()

            async def answered() -> None:
                await _answer(respond, reply)
                if begin is not None:
                    await begin(lambda said: _answer(respond, said))

            ctx.later(answered())
            return
        if words and words[0].lower() in _DECISIONS:
            # Recorded, then answered: Slack hears back only once the decision is stored or refused.
            reply = await _reply(ctx, user, words)
            await ack()
            ctx.later(_answer(respond, reply))
            return
        await ack()  # reads only: answered at once, the reply follows

        async def read() -> None:
            await _answer(respond, await _reply(ctx, user, words))

        ctx.later(read())

    async def on_next_page(ack: AsyncAck, context: AsyncBoltContext, respond: AsyncRespond) -> None:
        try:
            req = interaction(context)
            user = req.user.id
            cursor = (req.actions[0].value if req.actions else None) or ""
            reply = await pending_page(ctx, user, cursor or None)
        except EngineError:
            reply = {"text": ":warning: That page is no longer valid; run `/hitl pending` again."}
        except Exception:
            log.exception("next page failed")
            reply = {"text": ":warning: Something went wrong. Run `/hitl pending` again."}
        try:
            await respond(response_type="ephemeral", replace_original=True, **reply)
        except Exception:
            log.exception("could not answer the page click")

    app.command("/hitl")(ctx.tracked(on_hitl))
    app.action(ACTION_PENDING_PAGE)(ctx.acked(on_next_page))


async def _reply(ctx: BotContext, user: str, words: list[str]) -> dict[str, Any]:
    """What ``/hitl <words>`` answers; an unexpected failure is a sentence, never silence."""
    try:
        return await _dispatch(ctx, user, words)
    except Exception:
        log.exception("/hitl %s failed", words[:1])
        return {"text": ":warning: Something went wrong. Run `/hitl pending` to see where things stand."}


async def _answer(respond: AsyncRespond, reply: dict[str, Any]) -> None:
    try:
        await respond(response_type="ephemeral", **reply)
    except Exception:
        log.exception("could not answer /hitl")


async def _dispatch(ctx: BotContext, user: str, words: list[str]) -> dict[str, Any]:
    if not user:
        return {"text": USAGE}
    cmd, rest = (words[0].lower(), words[1:]) if words else ("help", [])
    if cmd == "pending":
        return await pending_page(ctx, user)
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
            a = await ctx.store.approvals.get(rest[0])
        except EngineError as exc:
            return {"text": refusal_text(exc, None)}
        reviewer = await ctx.reviewers.reviewer(user)
        if user != a.requester and not eligible(a, reviewer, ctx.clock.now()):
            # The arguments and evidence are for the people who decide (and the requester), not the workspace.
            await ctx.lifecycle.refused(a.id, user, ErrorCode.NOT_ELIGIBLE, "/hitl show")
            return {"text": refusal_text(EngineError("", code=ErrorCode.NOT_ELIGIBLE), a)}
        declared = ctx.config.declared_schema(a.tool)
        blocks = card(a, now=ctx.clock.now(), detail=True, declared=declared, view=ctx.config.present(a))
        if user != a.requester:
            ctx.later(ctx.looked(a.id, user))  # a reviewer looked: the first look is counted
        return {"text": f"{a.id}: {a.tool}", "blocks": blocks}
    if cmd == "trust":
        return await _trust(ctx, user, rest)
    if cmd in ("halt", "unhalt"):
        return await _halt(ctx, user, cmd, rest)
    if cmd == "delegate":
        return await delegate_command(ctx, user, rest)
    if cmd == "delegations":
        return await delegations_text(ctx, user)
    if cmd == "halts":
        orders = await ctx.store.halts.active()
        if not orders:
            return {"text": "Nothing is halted."}
        lines = [
            f"• {_scope_text(o.scope)} by {who(o.by)} since {when(o.at)}"
            + (f": {label(o.reason, 200)}" if o.reason else "")
            for o in orders
        ]
        return {"text": ":octagonal_sign: *Halted*\n" + "\n".join(lines)}
    if cmd == "help":
        return {"text": USAGE}
    return {"text": f":grey_question: Unknown command `{label(cmd, 30)}`.\n{USAGE}"}


async def pending_page(ctx: BotContext, user: str, cursor: str | None = None) -> dict[str, Any]:
    """One page of what ``user`` may decide, the most important first (each says why it ranks there), with how much
    waits on them in all and a "Next page" button when there is more."""
    reviewer = await ctx.reviewers.reviewer(user)
    if not reviewer.roles:
        return {"text": ":information_source: You are not a reviewer in any role, so there is nothing for you."}
    roles, now = sorted(reviewer.roles), ctx.clock.now()
    page = await queue_page(
        ctx.store.approvals, now=now, roles=roles, exclude_requester=user, limit=PAGE, cursor=cursor
    )
    mine = [a for a in page.items if may_vote(a, reviewer, now)]
    if not mine and page.cursor is None:
        return {"text": ":tada: Nothing is waiting for you."}
    waiting = await ctx.store.approvals.count_pending(roles=roles, exclude_requester=user, now=now)
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"*{waiting_text(waiting)}*, the most important first"
                + (" (more on the next page)" if page.cursor else ""),
            },
        }
    ]
    for a in mine:  # a list, not a wall of cards: two lines each, the card one link away
        entry = queue_entry(a, view=ctx.config.present(a), now=now, link=await ctx.home.card_link(a))
        blocks.append(
            {
                "type": "section",
                "block_id": f"hitl_pending:{a.id}",
                "text": {"type": "mrkdwn", "text": entry[:2900], "verbatim": True},
            }
        )
    if page.cursor:
        blocks.append(
            {
                "type": "actions",
                "block_id": "hitl_pending_more",
                "elements": [
                    {
                        "type": "button",
                        "action_id": ACTION_PENDING_PAGE,
                        "text": {"type": "plain_text", "text": "Next page"},
                        "value": page.cursor,
                    }
                ],
            }
        )
    noun = "approval is" if len(mine) == 1 else "approvals are"
    return {"text": f"{len(mine)} {noun} waiting for you", "blocks": blocks[:50]}


async def _trust(ctx: BotContext, user: str, rest: list[str]) -> dict[str, Any]:
    now = ctx.clock.now()
    sub = rest[0].lower() if rest else "list"
    if sub == "list":
        # Only grants of tools this person may decide: a session id and whose calls run unreviewed are not the
        # whole workspace's business.
        roles = (await ctx.reviewers.reviewer(user)).roles
        grants = [
            g
            for g in await ctx.store.trust.all_active(now=now)
            if (len(rest) < 2 or g.session_id == rest[1]) and ctx.config.may_decide_tool(roles, g.tool)
        ]
        if not grants:
            return {"text": "No tool you review is trusted right now."}
        lines = [
            f"• `{label(g.tool, 60)}` for `{label(g.requester, 60)}` in `{label(g.session_id, 60)}`, granted by "
            f"{who(g.granted_by)}, until {when(g.until)}"
            for g in grants[:40]
        ]
        return {"text": "*Trusted tools*\n" + "\n".join(lines)}
    if sub == "revoke" and len(rest) >= 2:
        reviewer = await ctx.reviewers.reviewer(user)
        if not reviewer.roles:
            return {"text": ":no_entry: Only reviewers can revoke trust."}
        tool = rest[1]
        sessions = (
            [rest[2]]
            if len(rest) > 2
            else sorted({g.session_id for g in await ctx.store.trust.all_active(now=now) if g.tool == tool})
        )
        if not ctx.config.may_decide_tool(reviewer.roles, tool):
            return {"text": f":no_entry: Only reviewers of `{label(tool, 60)}` can revoke its trust."}
        revoked = [s for s in sessions if await ctx.store.trust.revoke(s, tool, by=user, now=now)]
        if revoked:
            await ctx.home.changed(tool=tool)  # the tabs of those who may decide the tool list its trust
        if not revoked:
            return {"text": f"`{label(tool, 60)}` was not trusted anywhere."}
        return {"text": f":lock: `{label(tool, 60)}` is no longer trusted in {len(revoked)} session(s)."}
    return {"text": f":grey_question: Try `/hitl trust list` or `/hitl trust revoke <tool> [session]`.\n{USAGE}"}


def _scope_text(scope: str) -> str:
    return "every tool" if scope == EVERY_TOOL else f"`{label(scope, 60)}`"


async def _halt(ctx: BotContext, user: str, cmd: str, rest: list[str]) -> dict[str, Any]:
    """``/hitl halt <tool|all> [reason]`` and ``/hitl unhalt <tool|all>``: the admin role only; recorded (and
    audited) before the answer."""
    if not rest:
        return {"text": f":grey_question: `/hitl {cmd}` needs a tool or `all`, e.g. `/hitl {cmd} refund`.\n{USAGE}"}
    scope = None if rest[0].lower() in ("all", EVERY_TOOL) else rest[0]
    reviewer = await ctx.reviewers.reviewer(user)
    if ctx.config.may_halt(reviewer.roles) is not True:
        role = ctx.config.oversight.admin_role
        await ctx.store.audit.append(
            AuditEntry(
                at=ctx.clock.now(),
                actor=user,
                event="refused",
                outcome=str(ErrorCode.NOT_ELIGIBLE),
                detail=f"{cmd} {rest[0][:100]} via slack: not in the {role} role"[:500],
            )
        )
        return {"text": f":no_entry: Only the `{label(role, 40)}` role may {cmd} (hitl.yaml `oversight.admin_role`)."}
    if cmd == "halt":
        order = await ctx.lifecycle.halt(scope, by=user, reason=" ".join(rest[1:]))
        await ctx.notifier.watch_halts()  # this server's cards and Home tabs say so now; other replicas at their sweep
        return {
            "text": f":octagonal_sign: Halted {_scope_text(order.scope)}: nothing new of it is proposed, approved or "
            "run until `/hitl unhalt`. Rejecting still works."
        }
    lifted, resumed = await ctx.lifecycle.unhalt(scope, by=user)
    if lifted is None:
        return {"text": f"{_scope_text(scope or EVERY_TOOL)} is not halted. `/hitl halts` lists what is."}
    await ctx.notifier.watch_halts()
    more = f" {resumed} paused run(s) go on." if resumed else ""
    return {"text": f":white_check_mark: {_scope_text(lifted.scope)} is no longer halted.{more}"}
