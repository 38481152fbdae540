"""Approval -> Block Kit. Pure functions: no I/O, time passed in.

The card has a trusted part built only from structured fields, a labelled untrusted-evidence part shown
as an escaped code block, and the controls. Button values carry ``id|version|action hash`` so a click on
an old card is detected.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hitl.bot.escape import code_block, inert, label
from hitl.engine.domain.edits import edit_of
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, ApprovalKind, Decision, DecisionKind, Status
from hitl.engine.domain.spot_checks import checked_tool, is_spot_check
from hitl.engine.runner.step_context import DOUBT
from hitl.engine.service import TRUST_TTL

__all__ = [
    "ACTION_APPROVE",
    "ACTION_FEEDBACK",
    "ACTION_MODIFY",
    "ACTION_REJECT",
    "ACTION_TRUST",
    "ACTION_VIEW_ALL",
    "EVIDENCE",
    "EVIDENCE_LABEL",
    "HALTED",
    "button_value",
    "card",
    "card_text",
    "compact_card",
    "evidence_blocks",
    "expires_in",
    "halt_notice",
    "headline",
    "parse_button_value",
    "relative",
    "trust_scope",
    "when",
    "who",
]

ACTION_APPROVE = "hitl_approve"
ACTION_REJECT = "hitl_reject"
ACTION_MODIFY = "hitl_modify"
ACTION_TRUST = "hitl_trust"
ACTION_VIEW_ALL = "hitl_view_all"
ACTION_FEEDBACK = "hitl_feedback"
EVIDENCE_LABEL = "hitl_evidence_label"
EVIDENCE = "hitl_evidence"
"""The block ids of the untrusted evidence: the last blocks of a card, never next to its controls."""
HALTED = "hitl_halted"
"""The block id of the stop switch's notice on a card."""
_SLACK_USER = re.compile(r"^[UW][A-Z0-9_]{2,20}$")
# The exact grammar, ASCII only: no Unicode digits, no leading zeros, no trailing newline.
_VALUE = re.compile(r"(apr_[0-9A-Z]{10})\|([1-9][0-9]{0,8})\|([0-9a-f]{64})", re.ASCII)

_TITLES = {
    Status.PENDING: "Approval needed",
    Status.APPROVED: "Approved",
    Status.REJECTED: "Rejected",
    Status.EXPIRED: "Expired",
    Status.CANCELLED: "Cancelled",
    Status.SUPERSEDED: "Superseded",
    Status.EXECUTING: "Approved, running",
    Status.EXECUTED: "Approved and done",
    Status.FAILED: "Approved, but it failed",
}
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


def button_value(a: Approval) -> str:
    """What a card's buttons carry: the approval's id, version and full action hash (a click binds to exactly this)."""
    # The full hash (not a prefix): the click is bound to exactly this action, and the decide needs no read first.
    return f"{a.id}|{a.version}|{a.action_hash}"


def parse_button_value(value: str) -> tuple[str, int, str] | None:
    """``(approval id, version, action hash)`` or None for anything malformed or tampered with."""
    m = _VALUE.fullmatch(value) if isinstance(value, str) else None
    return (m.group(1), int(m.group(2)), m.group(3)) if m else None


def who(reviewer: str) -> str:
    """A Slack user as a mention; any other identity (cli:alice, auto-approve) escaped as text."""
    return f"<@{reviewer}>" if _SLACK_USER.match(reviewer) else f"`{label(reviewer, 80)}`"


def when(ts: float) -> str:
    """Slack renders the date in the reader's timezone; the fallback names its zone (UTC)."""
    return f"<!date^{int(ts)}^{{date_short_pretty}} {{time}}|{_utc(ts)}>"


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


def headline(a: Approval) -> str:
    """What the approval is about, in a few words: the tool's ``summary:`` sentence for the arguments as proposed,
    else the tool's name ("Did it happen? <tool>" for an effect in doubt). Plain text: the sentence carries argument
    values, so Slack's control characters are replaced, and it is never formatted."""
    if _in_doubt(a):
        return f"Did it happen? {a.tool.removeprefix(DOUBT)}"
    if is_spot_check(a):
        return _spot_title(a.model_copy(update={"status": Status.PENDING}))
    if a.summary and a.approved_args is None:  # the sentence describes the arguments as proposed
        return a.summary.replace("<", "‹").replace(">", "›").replace("&", "＆")
    return a.tool


def _spot_title(a: Approval) -> str:
    what = a.summary.replace("<", "‹").replace(">", "›").replace("&", "＆") if a.summary else checked_tool(a)
    verdict = {Status.PENDING: "Spot check", Status.APPROVED: "Looks right", Status.REJECTED: "Flagged"}
    return f"{verdict.get(a.status, 'Spot check ' + str(a.status))}: {what}"


def _title(a: Approval) -> str:
    if is_spot_check(a):
        return _spot_title(a)
    if _in_doubt(a) and a.status is Status.PENDING:
        return headline(a)
    return f"{_TITLES[a.status]}: {headline(a) if not _in_doubt(a) else a.tool}"


def card_text(a: Approval) -> str:
    """The notification text (shown in notifications and by clients without blocks)."""
    return f"{_TITLES[a.status]}: {label(a.tool, 80)} ({a.id})"


def card(
    a: Approval, *, now: float, live: bool = True, detail: bool = False, halt: HaltOrder | None = None
) -> list[dict[str, Any]]:
    """The review card for ``a`` in its current state. Controls only while it is pending. ``detail`` (``/hitl
    show``): also the policy's own account, its tier, rule and every rule that fired. ``halt``: the stop switch's
    order covering its tool: the card says so, and only Reject stays."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _title(a)[:150], "emoji": False},
        },
        {"type": "section", "fields": _fields(a, now)},
    ]
    if halt is not None and a.status is Status.PENDING:
        blocks.append(_halted(halt))
    if _in_doubt(a):
        tool = label(str(a.args.get("tool", a.tool.removeprefix(DOUBT))), 60)
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f":warning: *`{tool}` may or may not have happened.* The worker running it stopped "
                    "before recording its outcome. Check the system it acts on, then *Mark done* (it happened), "
                    "*Run again* (it did not) or *Stop* the run.",
                },
            }
        )
    elif a.why or a.reasons:
        why = "\n".join(f"• {label(r, 300)}" for r in (a.why or a.reasons)[:6])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*Why it needs review*\n{why}"}})
    if detail:
        rules = "\n".join(f"• {label(r, 300)}" for r in a.reasons[:8])
        policy = f"*Policy*: tier `{a.tier}`, rule `{label(a.rule, 60)}`\n{rules}"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": policy[:2900]}]})
    blocks += _action_blocks(a)
    if a.status is not Status.PENDING:
        blocks.append(_outcome(a))
    elif a.decisions:
        blocks.append(_progress(a))
    if a.status is Status.PENDING and live:
        blocks += [{"type": "divider"}, _controls(a, halted=halt is not None)]
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"Or: `/hitl approve {a.id}`  ·  `/hitl show {a.id}`"}],
            }
        )
    if a.evidence:
        blocks += [{"type": "divider"}, *evidence_blocks(a.evidence)]
    return blocks


def evidence_blocks(evidence: str) -> list[dict[str, Any]]:
    """The untrusted evidence, after the controls and apart from them: a label, then the text in a style no trusted
    block uses (small, each line as literal code: escaped, so nothing in it formats, mentions or links)."""
    lines = [f"`{line}`" for line in inert(evidence, 1800).split("\n") if line.strip()]
    return [
        {
            "type": "context",
            "block_id": EVIDENCE_LABEL,
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": ":warning: *Untrusted evidence* sent with the request, shown as plain text: do not follow "
                    "instructions in it.",
                }
            ],
        },
        {
            "type": "context",
            "block_id": EVIDENCE,
            "elements": [{"type": "mrkdwn", "text": "\n".join(lines) or "` `", "verbatim": True}],
        },
    ]


def compact_card(a: Approval, *, now: float) -> list[dict[str, Any]]:
    """Header, fields, arguments and controls: for lists such as ``/hitl pending``."""
    blocks = card(a, now=now)
    keep = [blocks[0], blocks[1], *_action_blocks(a)[:1]]
    controls = [b for b in blocks if b["type"] == "actions" and str(b.get("block_id", "")).startswith("hitl_actions")]
    return keep + controls


def expires_in(a: Approval, now: float) -> str:
    """How long a pending approval has left, as the card says it as of ``now`` (cards are rendered again on every
    change and reminder; the date before it is Slack's own, in the reader's zone). Empty once it is not pending."""
    return f" ({relative(a.expires_at, now)})" if a.status is Status.PENDING and a.expires_at > now else ""


def _fields(a: Approval, now: float) -> list[dict[str, Any]]:
    approvers = a.required_role or "any reviewer"
    votes = f" · {len(a.approvers)} of {a.quorum}" if a.quorum > 1 else ""
    requested = who(a.requester) + (f"\nvia {label(a.asked_by, 120)}" if a.asked_by else "")
    return [
        {"type": "mrkdwn", "text": f"*Requested by*\n{requested}"},
        {"type": "mrkdwn", "text": f"*Approvers*\n{label(approvers, 60)}{votes}"},
        {"type": "mrkdwn", "text": f"*Expires*\n{when(a.expires_at)}{expires_in(a, now)}"},
        {"type": "mrkdwn", "text": f"*Approval*\n`{a.id}` v{a.version}"},
        {"type": "mrkdwn", "text": f"*Action hash*\n`{short_hash(a.action_hash)}`"},
    ]


def _action_blocks(a: Approval) -> list[dict[str, Any]]:
    items = a.args.get("items") if "batch" in a.metadata else None
    if isinstance(items, list):
        shown = json.dumps(items[:5], ensure_ascii=False, indent=1)
        more = " (showing 5; press *View all*)" if len(items) > 5 else ""
        out: list[dict[str, Any]] = [
            {
                "type": "section",
                "block_id": f"hitl_args:{a.id}",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*Batch of {len(items)} × {label(a.tool, 60)}*{more}\n{code_block(shown, 2200)}",
                    "verbatim": True,
                },
            }
        ]
        if len(items) > 5:
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
    out = [_labelled(a) if _flat(a) else _exact(a)]
    edit = edit_of(a)
    if edit:
        lines = [
            f"• `{label(k, 60)}`: `{inert(_json(b), 200)}` → `{inert(_json(v), 200)}`" for k, (b, v) in edit.items()
        ]
        text = "*Changed by the reviewer* (before → after)\n" + "\n".join(lines[:20])
        out.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:2900], "verbatim": True}})
    return out


def _flat(a: Approval) -> bool:
    """Arguments a person reads best as labelled fields: no ``summary:`` sentence, at most 10 of them, none nested."""
    args = a.execute_args
    scalar = all(v is None or isinstance(v, str | int | float | bool) for v in args.values())
    return not a.summary and 0 < len(args) <= 10 and scalar


def _labelled(a: Approval) -> dict[str, Any]:
    """Each argument under its label (the schema's ``title``, else its name), its value as literal code: escaped, so
    nothing in it formats, mentions or links; the schema's ``description``, if any, as a line of help under it. The
    exact JSON stays one command away (``/hitl show``)."""
    props = (a.args_schema or {}).get("properties") or {}
    fields = []
    for name, value in a.execute_args.items():
        spec = props.get(name) if isinstance(props, dict) else None
        named = spec.get("title") if isinstance(spec, dict) else None
        title = named if isinstance(named, str) and named else name
        about = spec.get("description") if isinstance(spec, dict) else None
        help_ = f"\n_{label(about, 150)}_" if isinstance(about, str) and about.strip() else ""
        shown = inert(_json(value) if not isinstance(value, str) else value, 1700) or " "
        fields.append({"type": "mrkdwn", "text": f"*{label(title, 60)}*\n`{shown}`{help_}", "verbatim": True})
    return {"type": "section", "block_id": f"hitl_args:{a.id}", "fields": fields}


def _exact(a: Approval) -> dict[str, Any]:
    """The exact arguments as JSON: for nested values, or under a ``summary:`` sentence."""
    text = json.dumps(a.execute_args, ensure_ascii=False, indent=1)
    return {
        "type": "section",
        "block_id": f"hitl_args:{a.id}",
        "text": {
            "type": "mrkdwn",
            "text": f"*Exact arguments* (`{label(a.tool, 60)}`)\n{code_block(text, 2400)}",
            "verbatim": True,
        },
    }


def _json(value: Any) -> str:
    return "(none)" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _decision_line(d: Decision, *, spot: bool = False) -> str:
    if spot and d.kind in (DecisionKind.APPROVE, DecisionKind.REJECT):
        said = "said it looks right" if d.kind is DecisionKind.APPROVE else "flagged it"
        return f"{who(d.reviewer)} {said} {when(d.at)} via {label(d.via, 20)}"
    verb = {
        DecisionKind.APPROVE: "approved",
        DecisionKind.REJECT: "rejected",
        DecisionKind.MODIFY: "modified and approved",
        DecisionKind.TRUST: "approved and trusted the tool for this session",
        DecisionKind.FEEDBACK: "sent feedback",
    }[d.kind]
    return f"{who(d.reviewer)} {verb} {when(d.at)} via {label(d.via, 20)}"


def _outcome(a: Approval) -> dict[str, Any]:
    spot = is_spot_check(a)
    title = _spot_title(a).split(":", 1)[0] if spot else _TITLES[a.status]
    lines = [f"{_ICONS[a.status]} *{title}*"]
    lines += [_decision_line(d, spot=spot) for d in a.decisions[-5:]]
    trusted = next((d for d in a.decisions if d.kind is DecisionKind.TRUST), None)
    if trusted is not None:
        lines.append(f"_Trust:_ {label(trust_scope(a, granted_at=trusted.at), 300)}")
    if a.status is Status.EXPIRED:
        lines.append(f"Expired {when(a.expires_at)} without a decision.")
    if a.superseded_by:
        lines.append(f"Replaced by `{a.superseded_by}` (the edit needs other approvers).")
    text = "\n".join(lines)
    if a.reason:
        text += "\n" + code_block(a.reason, 600)
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def _progress(a: Approval) -> dict[str, Any]:
    role = label(a.required_role or "reviewer", 40)
    lines = [f":ballot_box_with_check: *{len(a.approvers)} of {a.quorum} {role} approvals*"]
    lines += [_decision_line(d) for d in a.decisions[-5:]]
    return {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines), "verbatim": True}}


def _in_doubt(a: Approval) -> bool:
    return a.kind is ApprovalKind.DOUBT


def _button(action: str, label: str, value: str, *, style: str | None = None, confirm: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "button", "action_id": action, "text": _plain(label), "value": value}
    if style:
        out["style"] = style
    if confirm:
        out["confirm"] = confirm
    return out


def _confirm(title: str, text: str, yes: str, *, danger: bool = False) -> dict[str, Any]:
    """Slack's own "are you sure?" dialog before a button acts."""
    out = {"title": _plain(title), "text": _plain(text[:300]), "confirm": _plain(yes), "deny": _plain("Cancel")}
    return {**out, "style": "danger"} if danger else out


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def _doubt_controls(a: Approval) -> dict[str, Any]:
    """Mark done (feedback: what the reviewer found), Run again (approve), Stop (reject)."""
    value = button_value(a)
    tool = str(a.args.get("tool", ""))[:60]
    again = _confirm("Run it again?", f"If {tool} did happen, it will happen twice.", "Run again")
    stop = _confirm("Stop the run?", f"Nothing more runs. {_reason_ask(a)}", "Stop", danger=True)
    buttons = [
        _button(ACTION_FEEDBACK, "Mark done", value, style="primary"),
        _button(ACTION_APPROVE, "Run again", value, confirm=again),
        _button(ACTION_REJECT, "Stop", value, style="danger", confirm=stop),
    ]
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def halt_notice(order: HaltOrder) -> str:
    """The stop switch's order in a reviewer's words: what is halted, by whom, why (mrkdwn, escaped)."""
    what = "Every tool is" if order.scope == EVERY_TOOL else f"`{label(order.scope, 60)}` is"
    why = f": {label(order.reason, 300)}" if order.reason else ""
    return f":octagonal_sign: *Halted.* {what} stopped by {who(order.by)}{why}"


def _halted(order: HaltOrder) -> dict[str, Any]:
    """The card's notice: the halt, and what still works."""
    text = f"{halt_notice(order)}. It cannot be approved until an admin lifts the halt; Reject still works."
    return {"type": "section", "block_id": HALTED, "text": {"type": "mrkdwn", "text": text, "verbatim": True}}


def _spot_controls(a: Approval) -> dict[str, Any]:
    """A spot check's answers: it already ran, so the question is only whether it looked right."""
    value = button_value(a)
    flag = _confirm(
        "Flag this action?",
        "It already ran. A flag records that it was wrong and counts as a correction. You can say why (optional).",
        "Flag",
        danger=True,
    )
    buttons = [
        _button(ACTION_APPROVE, "Looks right", value, style="primary"),
        _button(ACTION_REJECT, "Flag", value, style="danger", confirm=flag),
    ]
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def _controls(a: Approval, *, halted: bool = False) -> dict[str, Any]:
    if is_spot_check(a):
        return _spot_controls(a)
    if _in_doubt(a):
        return _doubt_controls(a)
    value = button_value(a)
    reject = _confirm("Reject this action?", f"{a.tool[:80]} will not run. {_reason_ask(a)}", "Reject", danger=True)
    if halted:  # the stop switch: only Reject
        return {
            "type": "actions",
            "block_id": f"hitl_actions:{a.id}",
            "elements": [_button(ACTION_REJECT, "Reject", value, style="danger", confirm=reject)],
        }
    buttons = [
        _button(ACTION_APPROVE, "Approve", value, style="primary"),
        _button(ACTION_REJECT, "Reject", value, style="danger", confirm=reject),
    ]
    if a.modifiable and a.kind not in (ApprovalKind.GATE, ApprovalKind.REVIEW, ApprovalKind.DOUBT):
        buttons.append(_button(ACTION_MODIFY, "Modify", value))
    if a.kind in (ApprovalKind.GATE, ApprovalKind.REVIEW):
        buttons.append(_button(ACTION_FEEDBACK, "Send feedback", value))
    if a.trustable and a.quorum == 1:
        trust = _confirm("Approve and trust?", trust_scope(a), "Approve and trust")
        buttons.append(_button(ACTION_TRUST, "Trust for session", value, confirm=trust))
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def _reason_ask(a: Approval) -> str:
    """What happens after the confirmation: a form that asks why, as the approval requires it or not."""
    return "You will be asked for a reason (required)." if a.reason_required else "You can say why (optional)."


def trust_scope(a: Approval, *, granted_at: float | None = None) -> str:
    """What a Trust lets through, said before anyone consents to it and on the card after: whose calls first (the
    grant covers the requester alone), this tool, this session, for how long (until when, once granted), and what
    it never covers. Plain text, at most 300 characters (Slack's limit for a confirmation's text)."""
    ttl = a.metadata.get(TRUST_TTL)
    span = _span(float(ttl)) if isinstance(ttl, int | float) else "the configured time"
    until = f"until {_utc(granted_at + float(ttl))}" if granted_at is not None and isinstance(ttl, int | float) else ""
    text = (
        f"For {a.requester[:60]} only: approves this call, and lets its later {a.tool[:60]} calls in session "
        f"{a.session_id[:60]} run without review for {span}{' (' + until + ')' if until else ''}. Never covers "
        "another requester, escalated approvals or tools marked always-ask."
    )
    return text[:300]


def _span(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{int(seconds)} seconds"


def _utc(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
