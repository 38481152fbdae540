"""``/hitl delegate @person until <date> [role]``, ``/hitl delegate end [id]`` and ``/hitl delegations``.

The date is read in the time zone of the person delegating (their Slack profile's, from ``users.info``) and echoed
back in UTC; who may be named is the rule every surface keeps
(:class:`~hitl.engine.delegation.delegates.DelegateRule`: a reviewer ``hitl.yaml`` lists, or an active person of
the workspace), and a refusal says its code as the API and the CLI do. Every change is recorded (and audited)
before the answer, and both people's Home tabs show it.
"""

from __future__ import annotations

import re
from typing import Any

from hitl.bot.context import BotContext
from hitl.bot.outbound.workspace import SlackWorkspace
from hitl.bot.views.blocks import who
from hitl.bot.views.escape import escape_mrkdwn, label
from hitl.bot.views.home import delegation_lines
from hitl.engine.domain.delegation import MAX_DAYS, parse_until, utc_text, zone
from hitl.engine.errors import EngineError, InvalidInput

__all__ = ["DELEGATE_USAGE", "delegate_command", "delegations_text"]

DELEGATE_USAGE = (
    "`/hitl delegate @person until YYYY-MM-DD [role]` hands your reviewer roles (or one of them) to a colleague "
    f"until the end of that day in your time zone, at most {MAX_DAYS} days; `/hitl delegate end` ends it; "
    "`/hitl delegations` shows what concerns you."
)
_MENTION = re.compile(r"^<@([A-Z0-9_]+)(?:\|[^>]*)?>$")
"""A person as Slack sends them in a command's text (``should_escape: true`` in the manifest): ``<@U024BE7LH|ana>``."""
_TIME = re.compile(r"^\d{1,2}:\d{2}$")


async def delegate_command(ctx: BotContext, user: str, rest: list[str]) -> dict[str, Any]:
    """What ``/hitl delegate <rest>`` answers, once what it gives or ends is recorded."""
    if rest and rest[0].lower() in ("end", "revoke", "stop"):
        try:
            ended = await ctx.delegations.end(user, rest[1] if len(rest) > 1 else None)
        except EngineError as exc:
            return {"text": f":grey_question: {exc.message}"}
        return {
            "text": f":white_check_mark: {who(ended.delegator)}'s delegation to {who(ended.delegate)} has ended: "
            "from now on neither acts for the other."
        }
    if len(rest) < 3 or rest[1].lower() != "until" or not _MENTION.match(rest[0]):
        return {"text": f":grey_question: {DELEGATE_USAGE}"}
    m = _MENTION.match(rest[0])
    assert m is not None
    delegate, date, more = m.group(1), rest[2], rest[3:]
    if more and _TIME.match(more[0]):
        date, more = f"{date} {more[0]}", more[1:]
    role = more[0] if more else None
    try:
        tz_name = (await SlackWorkspace(ctx.notifier.client).profile(user) or {}).get("tz")
        try:
            tz = zone(tz_name if isinstance(tz_name, str) else None)
            until = parse_until(date, tz)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None  # coded as the API and the CLI code it
        me = (await ctx.reviewers.reviewer(user)).in_own_right()  # what they hold themselves: never re-delegated
        given = await ctx.delegations.give(me, delegate, until=until, role=role, via="slack", rule=ctx.delegates)
    except EngineError as exc:
        return {"text": f":no_entry: {escape_mrkdwn(exc.message)} `{exc.code}`"}
    what = f"the role `{label(given.role, 60)}`" if given.role else f"your roles ({', '.join(sorted(me.roles))})"
    return {
        "text": f":handshake: You delegated {what} to {who(delegate)} until *{utc_text(given.until)}* (the end you "
        f"gave, read in {label(tz.key, 60)}). They decide what you may decide, as one person with you: neither of "
        f"you decides the other's requests, and together you are one vote. `/hitl delegate end` ends it sooner "
        f"({given.id})."
    }


async def delegations_text(ctx: BotContext, user: str) -> dict[str, Any]:
    """What ``/hitl delegations`` answers: the delegation ``user`` gave and those handed to them, in force."""
    given, received = await ctx.delegations.of(user)
    lines = delegation_lines(given, received, ctx.clock.now())
    if not lines:
        return {"text": f"No delegation concerns you. {DELEGATE_USAGE}"}
    return {"text": "\n".join(lines)}
