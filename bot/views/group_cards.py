"""A group card: like approvals a flood brought together (:mod:`hitl.engine.domain.grouping`), on one message.

It says how many, whose, for which tool, what they add up to, and lists the first few, each one click from its own
card (every control of a single card). "View all" lists every member. "Approve all" and "Reject all" decide every
pending member the card shows, bound to the group's digest; a card drawn for another set of members is refused.
Like a single card, hitl's own words come from structured fields, and each member's summary is escaped as
untrusted text; no member's evidence is on the group card (its own card shows it, apart from the controls).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from hitl.bot.requests.button_values import button_value
from hitl.bot.views.blocks import expires_in, halt_notice, when, who
from hitl.bot.views.controls import button, confirm_dialog, reason_ask
from hitl.bot.views.escape import label
from hitl.engine.domain.grouping import KeyAmount, decidable_together, group_digest, in_order, key_amounts
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.presentation import DECISION_VERBS, Presentation, present

__all__ = [
    "ACTION_GROUP_APPROVE",
    "ACTION_GROUP_OPEN",
    "ACTION_GROUP_PAGE",
    "ACTION_GROUP_REJECT",
    "ACTION_GROUP_VIEW",
    "FIRST_FEW",
    "PAGE_SIZE",
    "DECIDED_ON_CARD",
    "decided_blocks",
    "group_card",
    "group_name",
    "group_text",
    "group_value",
    "member_list_view",
    "money_fields",
    "parse_group_value",
    "parse_page_value",
    "still_needed",
]

ACTION_GROUP_APPROVE = "hitl_group_approve"
ACTION_GROUP_REJECT = "hitl_group_reject"
ACTION_GROUP_VIEW = "hitl_group_view"
ACTION_GROUP_OPEN = "hitl_group_open"
ACTION_GROUP_PAGE = "hitl_group_page"
FIRST_FEW = 5
"""Members listed on the card itself; "View all" lists the rest."""
PAGE_SIZE = 20
"""Members per page of "View all" (a modal holds at most 100 blocks)."""
DECIDED_ON_CARD = 20
"""Members a decided group's card lists with how each ended (a message holds 50 blocks); View all pages the rest."""

_GROUP_VALUE = re.compile(r"(apr_[0-9A-Z]{10})\|([0-9a-f]{64})", re.ASCII)
_WORD = re.compile(r"[a-z]{2,30}", re.ASCII)
_PAGE_VALUE = re.compile(r"(apr_[0-9A-Z]{10})\|([0-9]{1,5})", re.ASCII)

_ViewOf = Callable[[Approval], Presentation]
_PageOf = Callable[[str], str]
_UNLINKABLE = re.compile(r"[\s<>|]")


def group_value(leader: str, digest: str) -> str:
    """What a group's buttons carry: its first member's id (which names its message) and the group's digest."""
    return f"{leader}|{digest}"


def parse_group_value(value: str) -> tuple[str, str] | None:
    """``(first member's id, group digest)``, or None for anything malformed or tampered with."""
    m = _GROUP_VALUE.fullmatch(value) if isinstance(value, str) else None
    return (m.group(1), m.group(2)) if m else None


def parse_page_value(value: str) -> tuple[str, int] | None:
    """``(first member's id, page)`` of a "View all" page button, or None."""
    m = _PAGE_VALUE.fullmatch(value) if isinstance(value, str) else None
    return (m.group(1), int(m.group(2))) if m else None


def money_fields(declared: Mapping[str, Any] | None) -> dict[str, str]:
    """The arguments a tool's declared schema marks as money (``x-currency``), with their currency: the amounts a
    group card adds up."""
    props = (declared or {}).get("properties")
    return {
        name: str(spec["x-currency"])
        for name, spec in (props.items() if isinstance(props, dict) else ())
        if isinstance(spec, dict) and spec.get("x-currency")
    }


def group_text(members: Sequence[Approval]) -> str:
    """The notification text (shown in notifications and by clients without blocks)."""
    pending = sum(a.is_open for a in members)
    voted = [a for a in members if a.is_open and a.approvers]
    first = members[0]
    state = f"{pending} of {len(members)} need approval" if pending else _outcomes(members)
    votes = f": {len(voted)} voted on, {still_needed(voted)}" if voted else ""
    return f"{len(members)} × {label(first.tool, 80)} from {label(first.requester, 60)}: {state}{votes}"


def still_needed(voted: Sequence[Approval]) -> str:
    """What members that have votes but are still pending (a quorum of two or more) lack, in the reviewer's words:
    "each still needs 1 more finance vote" (one group: the members share their role and quorum)."""
    short = sorted({max(a.quorum - len(a.approvers), 1) for a in voted})
    more = str(short[0]) if len(short) == 1 else f"{short[0]}-{short[-1]}"
    role = f" {label(voted[0].required_role, 40)}" if voted[0].required_role else ""
    return f"each still needs {more} more{role} vote{'' if short == [1] else 's'}"


def group_card(
    members: Sequence[Approval],
    *,
    now: float,
    halt: HaltOrder | None = None,
    currencies: Mapping[str, str] | None = None,
    view_of: _ViewOf | None = None,
    page_of: _PageOf | None = None,
) -> list[dict[str, Any]]:
    """The group card for ``members`` (two or more) as they now stand. ``currencies``: the tool's declared money
    fields (the amounts the card adds up); ``view_of``: each member's one view (its headline); ``page_of``: each
    member's decision page in the web inbox (``web:``), linked as "Open in browser"."""
    everyone = in_order(members)
    pending = [a for a in everyone if a.is_open]
    first, leader = everyone[0], min(a.id for a in everyone)
    tool = label(first.tool, 60)
    heading = (
        f"Approval needed: {len(pending)} × {first.tool}"
        if pending
        else f"{len(everyone)} × {first.tool}: {_outcomes(everyone)}"
    )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": heading[:150], "emoji": False}},
        {"type": "section", "fields": _fields(first, pending, now)},
    ]
    if halt is not None and pending:
        text = f"{halt_notice(halt)}. None can be approved until an admin lifts the halt; Reject still works."
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}})
    shown = pending or everyone
    amounts = key_amounts(shown, currencies)
    lines = [f":package: *{len(everyone)} requests* for `{tool}`, grouped as they came in together"]
    lines += [_amount_line(k, len(shown)) for k in amounts]
    lines.append(_tally(everyone))
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines), "verbatim": True}})
    draw = view_of or present
    views = {a.id: draw(a) for a in shown}  # each member's one view, drawn once for its reasons and its line
    reasons = list(dict.fromkeys(r for a in shown for r in views[a.id].reasons))
    if reasons:
        why = "\n".join(f"• {label(r, 300)}" for r in reasons[:4])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f":mag: *Why they need review*\n{why}"}})
    for a in pending[:FIRST_FEW]:
        blocks.append(_member_line(a, views[a.id], page_of))
    if len(pending) > FIRST_FEW:
        more = f"…and {len(pending) - FIRST_FEW} more. *View all* lists every one."
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": more}]})
    if pending:
        blocks += [{"type": "divider"}, _controls(pending, leader, amounts, halted=halt is not None)]
    else:
        blocks += decided_blocks(everyone, leader, draw, page_of)
    digest = group_digest(pending)
    ids = f"{label(group_name(everyone), 200)} · digest `{short_hash(digest)}`"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": ids}]})
    return blocks


def member_list_view(
    members: Sequence[Approval], page: int, *, view_of: _ViewOf | None = None, page_of: _PageOf | None = None
) -> dict[str, Any]:
    """ "View all": every pending member, a page at a time, each one click from its own card (and, with
    ``page_of``, from its decision page in the web inbox)."""
    everyone = in_order(members)
    pending = [a for a in everyone if a.is_open]
    listed = pending or everyone  # a group no longer pending lists every member with how it ended
    leader = min(a.id for a in everyone)
    pages = max(1, -(-len(listed) // PAGE_SIZE))
    page = min(max(page, 0), pages - 1)
    start = page * PAGE_SIZE
    which = f"*{len(pending)} pending* of {len(everyone)}" if pending else f"*{len(everyone)} decided*"
    head = f"{which} · `{label(everyone[0].tool, 60)}` · page {page + 1} of {pages}"
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": head}}]
    draw = view_of or present
    blocks += [_member_line(a, draw(a), page_of) for a in listed[start : start + PAGE_SIZE]]
    turns = [
        button(ACTION_GROUP_PAGE, label_, f"{leader}|{n}")
        for label_, n, ok in (("Previous", page - 1, page > 0), ("Next", page + 1, page + 1 < pages))
        if ok
    ]
    if turns:
        blocks.append({"type": "actions", "block_id": "hitl_group_pages", "elements": turns})
    return {
        "type": "modal",
        "callback_id": "hitl_group_list",
        "title": {"type": "plain_text", "text": "Every request", "emoji": False},
        "close": {"type": "plain_text", "text": "Close", "emoji": False},
        "private_metadata": leader,
        "blocks": blocks,
    }


def _fields(first: Approval, pending: Sequence[Approval], now: float) -> list[dict[str, Any]]:
    approvers = label(first.required_role or "any reviewer", 60) + (
        f" · {first.quorum} each" if first.quorum > 1 else ""
    )
    voted = _voted_on_all(pending)
    if voted:  # who decides is who may still vote: those who voted on every pending member no longer do
        approvers += f"\nnot {', '.join(who(p) for p in voted[:5])} (voted)"
    requested = who(first.requester) + (f"\nvia {label(first.asked_by, 120)}" if first.asked_by else "")
    fields = [
        {"type": "mrkdwn", "text": f":bust_in_silhouette: *Requested by*\n{requested}"},
        {"type": "mrkdwn", "text": f":busts_in_silhouette: *Approvers*\n{approvers}"},
    ]
    if pending:
        soonest = min(pending, key=lambda a: a.expires_at)
        text = f":alarm_clock: *First expires*\n{when(soonest.expires_at)}{expires_in(soonest, now)}"
        fields.append({"type": "mrkdwn", "text": text})
    return fields


def _amount_line(k: KeyAmount, n: int) -> str:
    unit = f" {label(k.currency, 8)}" if k.currency else ""
    span = f" · each from `{_num(k.low)}` to `{_num(k.high)}`" if k.low != k.high else f" · `{_num(k.low)}` each"
    return f":abacus: *{label(k.name, 60)}*: total `{_num(k.total)}`{unit} over {n}{span}"


def _num(d: Decimal) -> str:
    """Exact, with thousands marked: ``12,345.5`` (never rounded: a total a reviewer checks must be the sum)."""
    whole, _, frac = f"{abs(d):f}".partition(".")
    return ("-" if d < 0 else "") + f"{int(whole):,}" + (f".{frac}" if frac else "")


def _counts(everyone: Sequence[Approval]) -> list[str]:
    """How many members stand in each state, in the states' order: ``["3 pending", "2 approved"]``."""
    counts: dict[Status, int] = {}
    for a in everyone:
        counts[a.status] = counts.get(a.status, 0) + 1
    return [f"{counts[s]} {s}" for s in Status if s in counts]


def _outcomes(everyone: Sequence[Approval]) -> str:
    """How a group no longer pending ended, in words: "10 approved, 2 rejected"."""
    return ", ".join(_counts(everyone))


def _tally(everyone: Sequence[Approval]) -> str:
    line = ":bar_chart: " + " · ".join(_counts(everyone))
    voted = [a for a in everyone if a.is_open and a.approvers]
    if voted:  # a quorum of two or more: how far the pending ones are, and that none of them is approved yet
        line += f" · {len(voted)} voted on, not approved yet: {still_needed(voted)}"
    return line


def _member_line(a: Approval, view: Presentation, page_of: _PageOf | None = None) -> dict[str, Any]:
    """One member: its id and headline (escaped, untrusted), a button to its own card, and with ``page_of`` a link
    to its decision page (in the text: a section holds one button, and a card 50 blocks)."""
    headline = view.headline
    text = f"`{a.id}` {label(headline, 240)}" + ("" if a.is_open else f"\n{_ended(a)}")
    url = page_of(a.id) if page_of is not None else None
    if url is not None and not _UNLINKABLE.search(url):  # hitl's own address; anything that could end the link is not
        text += f"\n<{url}|Open in browser>"
    return {
        "type": "section",
        "block_id": f"hitl_member:{a.id}",
        "text": {"type": "mrkdwn", "text": text, "verbatim": True},
        "accessory": button(ACTION_GROUP_OPEN, "Open", button_value(a)),
    }


def _controls(pending: Sequence[Approval], leader: str, amounts: list[KeyAmount], *, halted: bool) -> dict[str, Any]:
    """Approve all and Reject all (each bound to the digest of exactly these members), and View all. A group whose
    members each ask for more than a click is decided one by one: View all alone."""
    value = group_value(leader, group_digest(pending))
    n = len(pending)
    buttons: list[dict[str, Any]] = []
    if decidable_together(pending):
        # Each money field's total in its own currency: two currencies are never added together.
        sums = "; ".join(f"{k.name} totals {_num(k.total)}{f' {k.currency}' if k.currency else ''}" for k in amounts)
        if not halted:
            say = f"Each of the {n} runs once, as its own card shows it. {sums}".strip()
            buttons.append(
                button(
                    ACTION_GROUP_APPROVE,
                    f"Approve all {n}",
                    value,
                    style="primary",
                    confirm=confirm_dialog(f"Approve all {n}?", say, "Approve all"),
                )
            )
        why = reason_ask(required=any(a.reason_required for a in pending))
        buttons.append(
            button(
                ACTION_GROUP_REJECT,
                f"Reject all {n}",
                value,
                style="danger",
                confirm=confirm_dialog(f"Reject all {n}?", f"None of them will run. {why}", "Reject all", danger=True),
            )
        )
    buttons.append(button(ACTION_GROUP_VIEW, "View all", value))
    return {"type": "actions", "block_id": f"hitl_group:{leader}", "elements": buttons}


def _ended(a: Approval) -> str:
    """How one member ended, by whom and when (its own card tells the rest, reasons included)."""
    last = a.decisions[-1] if a.decisions else None
    if last is None:
        return f"_{label(str(a.status), 20)}_"
    return f"{who(last.reviewer)} {DECISION_VERBS[last.kind]} {when(last.at)}"


def decided_blocks(
    everyone: Sequence[Approval], leader: str, draw: _ViewOf, page_of: _PageOf | None = None
) -> list[dict[str, Any]]:
    """A group no longer pending: who decided it and when (each decider once, with how many members and the
    span of their times), then each member with how it ended and its Open, a screen's worth on the card and
    every one in View all's pages (a message holds 50 blocks)."""
    deciders: dict[tuple[str, DecisionKind], list[float]] = {}
    for a in everyone:
        for d in a.decisions:  # every vote: a quorum's first approvers decided too
            deciders.setdefault((d.reviewer, d.kind), []).append(d.at)
    lines = [":lock: *Decided*"]
    for (reviewer, kind), times in list(deciders.items())[:8]:
        span = when(min(times)) + (f" – {when(max(times))}" if max(times) - min(times) >= 60 else "")
        lines.append(f"{who(reviewer)} {DECISION_VERBS[kind]} {len(times)} · {span}")
    if len(deciders) > 8:
        lines.append(f"…and {len(deciders) - 8} more people")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "block_id": "hitl_group_decided", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}
    ]
    blocks += [_member_line(a, draw(a), page_of) for a in everyone[:DECIDED_ON_CARD]]
    if len(everyone) > DECIDED_ON_CARD:
        more = f"…and {len(everyone) - DECIDED_ON_CARD} more. *View all* lists every one."
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": more}]})
        value = group_value(leader, group_digest([]))
        view_all = button(ACTION_GROUP_VIEW, "View all", value)
        blocks.append({"type": "actions", "block_id": f"hitl_group:{leader}", "elements": [view_all]})
    return blocks


def group_name(members: Sequence[Approval]) -> str:
    """A group named by what it holds: "12 refunds from agent:riley" (a tool named in one word reads as a noun;
    any other as "12 issue_refund requests")."""
    first = members[0]
    n = len(members)
    tool = first.tool
    if _WORD.fullmatch(tool):
        thing = tool if n == 1 else tool + ("es" if tool.endswith(("s", "x", "ch", "sh")) else "s")
    else:
        thing = f"{tool} request{'' if n == 1 else 's'}"
    return f"{n} {thing} from {first.requester}"


def _voted_on_all(pending: Sequence[Approval]) -> list[str]:
    """Whoever voted on every pending member (a quorum of two or more): they decide none of them any more."""
    if not pending or not all(a.decisions for a in pending):
        return []
    common = set.intersection(*({v for d in a.decisions for v in d.voters} for a in pending))
    return sorted(common)
