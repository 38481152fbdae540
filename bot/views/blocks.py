"""Approval -> Block Kit. Pure functions: no I/O, time passed in.

The card has a trusted part built only from structured fields, a labelled untrusted-evidence part shown
as an escaped code block, and the controls. Button values carry ``id|version|action hash`` so a click on
an old card is detected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hitl.bot.requests.button_values import button_value
from hitl.bot.views.arguments import CARD_VALUES_BUDGET, argument_blocks
from hitl.bot.views.consequence import CONSEQUENCE_ROOM, consequence_blocks, drift_blocks
from hitl.bot.views.controls import (
    ACTION_VIEW_ALL,
    controls,
    open_in_browser,
    trust_scope,
    utc_time,
)
from hitl.bot.views.escape import label
from hitl.bot.views.evidence import evidence_blocks
from hitl.bot.views.marks import look_closely_line
from hitl.bot.views.reasons import reason_blocks, reasons_room, value_box
from hitl.bot.views.withdrawal import ReceiptsShown, withdrawal_blocks
from hitl.engine.domain.display import graphemes_cut, show
from hitl.engine.domain.edits import edit_of
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, ApprovalKind, Decision, DecisionKind, Status, Tier
from hitl.engine.domain.presentation import DECISION_VERBS, STATE_TITLES, Presentation, present
from hitl.engine.domain.redaction import bounded
from hitl.engine.domain.spot_checks import is_spot_check

__all__ = [
    "HALTED",
    "card",
    "card_text",
    "expires_in",
    "halt_notice",
    "is_slack_user",
    "relative",
    "value_box",
    "when",
    "who",
]

HALTED = "hitl_halted"
"""The block id of the stop switch's notice on a card."""
_SLACK_USER = re.compile(r"^[UW][A-Z0-9_]{2,20}$")

_ICONS = {
    Status.PENDING: ":lock:",
    Status.APPROVED: ":white_check_mark:",
    Status.REJECTED: ":x:",
    Status.EXPIRED: ":hourglass:",
    Status.CANCELLED: ":no_entry_sign:",
    Status.SUPERSEDED: ":arrows_counterclockwise:",
    Status.EXECUTING: ":gear:",
    Status.EXECUTED: ":white_check_mark:",
    Status.FAILED: ":warning:",
}


def is_slack_user(reviewer: str) -> bool:
    """Whether ``reviewer`` is a Slack user id (one a message can be sent to, and a mention can name)."""
    return bool(_SLACK_USER.match(reviewer))


def who(reviewer: str) -> str:
    """A Slack user as a mention; any other identity (cli:alice, auto-approve) escaped as text."""
    return f"<@{reviewer}>" if _SLACK_USER.match(reviewer) else f"`{label(reviewer, 80)}`"


def when(ts: float) -> str:
    """Slack renders the date in the reader's timezone; the fallback names its zone (UTC)."""
    return f"<!date^{int(ts)}^{{date_short_pretty}} {{time}}|{utc_time(ts)}>"


def relative(ts: float, now: float) -> str:
    """``ts`` from ``now`` as a person says it: "in 58 min", "3 h 5 min ago", "in 2 days", "just now"."""
    delta = ts - now
    span = abs(delta)
    if span < 60:
        return "just now" if delta <= 0 else "in under a minute"
    minutes = int(span // 60)
    if minutes < 60:
        text = f"{minutes} min"
    elif minutes < 48 * 60:
        hours, rest = divmod(minutes, 60)
        text = f"{hours} h" + (f" {rest} min" if rest and hours < 10 else "")
    else:
        days = minutes // (24 * 60)
        text = f"{days} days"
    return f"in {text}" if delta > 0 else f"{text} ago"


def card_text(a: Approval) -> str:
    """The notification text (shown in notifications and by clients without blocks)."""
    return f"{STATE_TITLES[a.status]}: {label(a.tool, 80)} ({a.id})"


def card(
    a: Approval,
    *,
    now: float,
    live: bool = True,
    detail: bool = False,
    halt: HaltOrder | None = None,
    declared: Mapping[str, Any] | None = None,
    view: Presentation | None = None,
    page: str | None = None,
    receipts: ReceiptsShown | None = None,
) -> list[dict[str, Any]]:
    """The review card for ``a`` in its current state, drawn from its one view (``view``, else built from ``a``
    and ``declared``: :mod:`hitl.engine.domain.presentation`). Controls only while it is pending. ``detail`` (``/hitl
    show``): also the policy's own account, its tier, rule and every rule that fired. ``halt``: the stop switch's
    order covering its tool: the card says so, and only Reject stays. ``declared``: the tool's schema in
    ``hitl.yaml``, the only source of the arguments' titles, help and currency. ``page``: its decision page in the web
    inbox, linked as "Open in browser". ``receipts``: a decided approval's receipts as its trail has them (None: no
    withdrawal part), drawn under the outcome.

    hitl's own fields come first, each behind an emoji no argument can draw (arguments are rich text, where an
    emoji is its own element); the arguments follow in boxes; the ids and the hash come after the decision; the
    untrusted evidence last, quoted, in a style nothing else uses."""
    view = view or present(a, declared=declared)
    marked = "⚠ " if view.look_closely else ""  # the headline carries its values' marks, where the eye starts
    heading = marked + graphemes_cut(view.heading, 150 - len(marked))  # Slack's header holds 150 with the mark
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": heading, "emoji": False},
        },
        {"type": "section", "fields": _fields(a, now)},
    ]
    if view.look_closely:
        blocks.append(look_closely_line(a, view.look_closely))
    if halt is not None and a.status is Status.PENDING:
        blocks.append(_halted(halt))
    if _in_doubt(a):
        tool = label(str(a.args.get("tool", a.tool.removeprefix(f"{ApprovalKind.DOUBT}:"))), 60)
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f":warning: *`{tool}` may or may not have happened.*",
                },
            }
        )
    if view.reasons:
        why = "\n".join(f"• {label(r, 300)}" for r in view.reasons[:6])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f":mag: *Why it needs review*\n{why}"}})
    if detail:
        rules = "\n".join(f"• {label(r, 300)}" for r in a.reasons[:8])
        policy = f"*Policy*: tier `{a.tier}`, rule `{label(a.rule, 60)}`\n{rules}"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": policy[:2900]}]})
    room = CONSEQUENCE_ROOM if view.consequence is not None else 0  # what the arguments give up for it
    room += CONSEQUENCE_ROOM if view.drift is not None else 0  # and for what was approved before it drifted
    blocks += _action_blocks(a, declared, budget=CARD_VALUES_BUDGET - reasons_room(a) - room)
    if view.drift is not None:
        blocks += drift_blocks(view.drift)
    if view.consequence is not None:
        blocks += consequence_blocks(view.consequence)
    if detail and a.args_schema is not None and a.args_schema != declared:
        blocks += _sent_schema(a.args_schema)
    if a.status is not Status.PENDING:
        blocks += _outcome(a, view)
        if receipts is not None:
            blocks += withdrawal_blocks(a, receipts, by=who)
    elif a.decisions:
        blocks += [_progress(a), *reason_blocks(a, by=who)]  # a vote's reason shows before the quorum is met
    if a.status is Status.PENDING and live:
        blocks += [{"type": "divider"}, controls(a, view.digest(), halted=halt is not None)]
    blocks.append(_identity(a, commands=a.status is Status.PENDING and live))
    if page is not None:
        blocks.append(open_in_browser(a, page))
    if a.evidence:
        blocks += [{"type": "divider"}, *evidence_blocks(a.evidence)]
    return blocks


def _sent_schema(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The schema the caller sent, as the untrusted text it is: it checked the arguments, and labels nothing."""
    return [
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": ":warning: *Schema sent with the call* (untrusted: it checked the arguments; its titles "
                    "and descriptions label nothing)",
                }
            ],
        },
        value_box("hitl_sent_schema", show(dict(schema)).text, 1500),
    ]


def _identity(a: Approval, *, commands: bool) -> dict[str, Any]:
    """The approval's id, version and action hash, below the decision (and the commands that decide it)."""
    ids = f"Approval {a.id} v{a.version} · action hash {short_hash(a.action_hash)}"
    text = f"Or: `/hitl approve {a.id}`  ·  `/hitl show {a.id}`\n{ids}" if commands else ids
    return {"type": "context", "block_id": f"hitl_ids:{a.id}", "elements": [{"type": "mrkdwn", "text": text}]}


def expires_in(a: Approval, now: float) -> str:
    """How long a pending approval has left, as the card says it as of ``now`` (cards are rendered again on every
    change and reminder; the date before it is Slack's own, in the reader's zone). Empty once it is not pending."""
    return f" ({relative(a.expires_at, now)})" if a.status is Status.PENDING and a.expires_at > now else ""


def _fields(a: Approval, now: float) -> list[dict[str, Any]]:
    """hitl's own fields, each behind an emoji: an argument is rich text, where no key or value can draw one."""
    approvers = a.required_role or "any reviewer"
    if a.backup_role and a.hand_on_at is not None and a.status is Status.PENDING:
        if a.handed_on(now):
            approvers += f", and {a.backup_role} (handed on {relative(a.hand_on_at, now)})"
        else:
            approvers += f"; {a.backup_role} {relative(a.hand_on_at, now)} if still waiting"
    votes = f" · {len(a.approvers)} of {a.quorum}" if a.quorum > 1 else ""
    requested = who(a.requester) + (f"\nvia {label(a.asked_by, 120)}" if a.asked_by else "")
    deciders = f":busts_in_silhouette: *Approvers*\n{label(approvers, 60)}{votes}"
    if a.tier is Tier.SELF and a.on_behalf_of:  # a person's own confirmation: no reviewer's role decides it
        deciders = f":bust_in_silhouette: *Only you confirm*\n{who(a.on_behalf_of)}, for whom the agent acts"
    return [
        {"type": "mrkdwn", "text": f":bust_in_silhouette: *Requested by*\n{requested}"},
        {"type": "mrkdwn", "text": deciders},
        {"type": "mrkdwn", "text": f":alarm_clock: *Expires*\n{when(a.expires_at)}{expires_in(a, now)}"},
    ]


def _action_blocks(a: Approval, declared: Mapping[str, Any] | None, *, budget: int) -> list[dict[str, Any]]:
    items = a.args.get("items") if "batch" in a.metadata else None
    if isinstance(items, list):
        return _batch_blocks(a, items)
    what = {
        "type": "section",
        "block_id": f"hitl_tool:{a.id}",
        "text": {"type": "mrkdwn", "text": f":gear: *What runs:* `{label(a.tool, 60)}`, with these arguments"},
    }
    out = [what, *argument_blocks(a, declared, budget=budget)]  # what the reasons below take, the values give up
    edit = edit_of(a)
    if edit:
        out.append(_edit_block(a, edit))
    return out


def _batch_blocks(a: Approval, items: list[Any]) -> list[dict[str, Any]]:
    """A batch's first items as exact JSON in a box, and every item one button away."""
    shown = show(items[:5])
    more = f" (showing 5; press View all {len(items)})" if len(items) > 5 else ""
    excerpt = graphemes_cut(shown.text, 2200)
    out: list[dict[str, Any]] = [
        {
            "type": "section",
            "block_id": f"hitl_tool:{a.id}",
            "text": {"type": "mrkdwn", "text": f":gear: *Batch of {len(items)} × `{label(a.tool, 60)}`*{more}"},
        },
        {
            "type": "rich_text",
            "block_id": f"hitl_args:{a.id}",
            "elements": [
                {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": excerpt}], "border": 0}
            ],
        },
    ]
    if len(items) > 5 or excerpt != shown.text:
        out.append(
            {
                "type": "actions",
                "block_id": f"hitl_batch:{a.id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": ACTION_VIEW_ALL,
                        "text": {"type": "plain_text", "text": f"View all {len(items)}"},
                        "value": button_value(a),
                    }
                ],
            }
        )
    return out


def _edit_block(a: Approval, edit: Mapping[str, tuple[Any, Any]]) -> dict[str, Any]:
    """What a reviewer's edit changed: each argument's value before and after, each in a box of its own."""
    elements: list[dict[str, Any]] = [
        {
            "type": "rich_text_section",
            "elements": [{"type": "text", "text": "Changed by the reviewer (before → after)", "style": {"bold": True}}],
        }
    ]
    for name, (before, after) in list(edit.items())[:10]:
        for when_, value in (("before", before), ("after", after)):
            shown = show(value)
            elements += [
                {
                    "type": "rich_text_section",
                    "elements": [
                        {"type": "text", "text": name[:120], "style": {"code": True}},
                        {"type": "text", "text": f"  {when_}, {shown.kind}", "style": {"italic": True}},
                    ],
                },
                {
                    "type": "rich_text_preformatted",
                    "elements": [{"type": "text", "text": bounded(shown.text, 301)}],
                    "border": 0,
                },
            ]
    return {"type": "rich_text", "block_id": f"hitl_edit:{a.id}", "elements": elements}


def _decision_line(a: Approval, d: Decision) -> str:
    # A vote cast through a delegated role says whose it also is: the card names both people.
    by = who(d.reviewer) if d.acting_for is None else f"{who(d.reviewer)} (acting for {who(d.acting_for)})"
    if d.kind is DecisionKind.MODIFY and a.status is Status.SUPERSEDED and d.args is not None:
        return f"{by} edited it {when(d.at)} via {label(d.via, 20)} (the edit went to other approvers)"
    if is_spot_check(a) and d.kind in (DecisionKind.APPROVE, DecisionKind.REJECT):
        said = "said it looks right" if d.kind is DecisionKind.APPROVE else "flagged it"
        return f"{by} {said} {when(d.at)} via {label(d.via, 20)}"
    verb = DECISION_VERBS[d.kind]
    return f"{by} {verb} {when(d.at)} via {label(d.via, 20)}"


def _outcome(a: Approval, view: Presentation) -> list[dict[str, Any]]:
    """How it ended: who decided it and when (the view's one line, its decider drawn as the one name the card gives
    each person), the votes before, then each reason as its decider typed it, read from the decision itself."""
    last = a.decisions[-1] if a.decisions else None
    lines = [f"{_ICONS[a.status]} *{view.title}*", _told(a, view, last)]
    lines += [f"Before: {_decision_line(a, d)}" for d in a.decisions[-5:-1]]
    trusted = next((d for d in a.decisions if d.kind is DecisionKind.TRUST), None)
    if trusted is not None:
        lines.append(f"_Trust:_ {label(trust_scope(a, granted_at=trusted.at), 300)}")
    if a.status is Status.EXPIRED:
        lines.append(f"It expired {when(a.expires_at)}.")
    out: list[dict[str, Any]] = [
        {
            "type": "section",
            "block_id": f"hitl_outcome:{a.id}",
            "text": {"type": "mrkdwn", "text": "\n".join(lines), "verbatim": True},
        }
    ]
    return out + reason_blocks(a, by=who)


def _told(a: Approval, view: Presentation, last: Decision | None) -> str:
    """The view's outcome line, its decider as a mention (the name every other line of the card gives them) and
    with when and via; the reason goes in a box of its own, not in a line of mrkdwn."""
    outcome = view.outcome or ""
    if last is None or not outcome.startswith(f"{last.reviewer} "):
        return label(outcome, 600)
    said = outcome[len(last.reviewer) + 1 :]
    if last.reason and said.endswith(f": {last.reason}"):
        said = said[: -len(last.reason) - 2]
    elif a.reason and said.endswith(f": {a.reason}"):
        said = said[: -len(a.reason) - 2]
    by = who(last.reviewer) if last.acting_for is None else f"{who(last.reviewer)} (acting for {who(last.acting_for)})"
    return f"{by} {label(said, 300)} {when(last.at)} via {label(last.via, 20)}"


def _progress(a: Approval) -> dict[str, Any]:
    role = label(a.required_role or "reviewer", 40)
    lines = [f":ballot_box_with_check: *{len(a.approvers)} of {a.quorum} {role} approvals*"]
    lines += [_decision_line(a, d) for d in a.decisions[-5:]]
    return {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines), "verbatim": True}}


def _in_doubt(a: Approval) -> bool:
    return a.kind is ApprovalKind.DOUBT


def halt_notice(order: HaltOrder) -> str:
    """The stop switch's order in a reviewer's words: what is halted, by whom, why (mrkdwn, escaped)."""
    what = "Every tool is" if order.scope == EVERY_TOOL else f"`{label(order.scope, 60)}` is"
    why = f": {label(order.reason, 300)}" if order.reason else ""
    return f":octagonal_sign: *Halted.* {what} stopped by {who(order.by)}{why}"


def _halted(order: HaltOrder) -> dict[str, Any]:
    """The card's notice: the halt, and what still works."""
    text = f"{halt_notice(order)}. It cannot be approved until an admin lifts the halt; Reject still works."
    return {"type": "section", "block_id": HALTED, "text": {"type": "mrkdwn", "text": text, "verbatim": True}}
