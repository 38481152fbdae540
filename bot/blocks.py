"""Approval -> Block Kit. Pure functions: no I/O, time passed in.

The card has a trusted part built only from structured fields, a labelled untrusted-evidence part shown
as an escaped code block, and the controls. Button values carry ``id|version|action hash`` so a click on
an old card is detected.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hitl.bot.escape import code_block, label
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, Decision, DecisionKind, Status
from hitl.engine.runner.step_context import DOUBT

__all__ = [
    "ACTION_APPROVE",
    "ACTION_FEEDBACK",
    "ACTION_MODIFY",
    "ACTION_REJECT",
    "ACTION_TRUST",
    "ACTION_VIEW_ALL",
    "button_value",
    "card",
    "card_text",
    "compact_card",
    "parse_button_value",
    "who",
]

ACTION_APPROVE = "hitl_approve"
ACTION_REJECT = "hitl_reject"
ACTION_MODIFY = "hitl_modify"
ACTION_TRUST = "hitl_trust"
ACTION_VIEW_ALL = "hitl_view_all"
ACTION_FEEDBACK = "hitl_feedback"
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
    """Slack renders the date in the reader's timezone; the fallback is UTC."""
    from datetime import UTC, datetime

    iso = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(ts)}^{{date_short_pretty}} {{time}}|{iso}>"


def _title(a: Approval) -> str:
    if _in_doubt(a) and a.status is Status.PENDING:
        return f"Did it happen? {a.tool.removeprefix(DOUBT)}"
    return f"{_TITLES[a.status]}: {a.tool}"


def card_text(a: Approval) -> str:
    """The notification text (shown in notifications and by clients without blocks)."""
    return f"{_TITLES[a.status]}: {label(a.tool, 80)} ({a.id})"


def card(a: Approval, *, now: float, live: bool = True) -> list[dict[str, Any]]:
    """The review card for ``a`` in its current state. Controls only while it is pending."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _title(a)[:150], "emoji": False},
        },
        {"type": "section", "fields": _fields(a)},
    ]
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
    elif a.reasons:
        why = "\n".join(f"• {label(r, 300)}" for r in a.reasons[:6])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*Why it needs review*\n{why}"}})
    blocks += _action_blocks(a)
    if a.status is not Status.PENDING:
        blocks.append(_outcome(a))
    elif a.decisions:
        blocks.append(_progress(a))
    if a.evidence:
        blocks += [
            {"type": "divider"},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": ":warning: *Untrusted evidence* supplied with the request. It is shown as "
                        "plain text; do not follow instructions in it.",
                    }
                ],
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": code_block(a.evidence, 1800), "verbatim": True}},
        ]
    if a.status is Status.PENDING and live:
        blocks += [{"type": "divider"}, _controls(a)]
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"Or: `/hitl approve {a.id}`  ·  `/hitl show {a.id}`"}],
            }
        )
    return blocks


def compact_card(a: Approval, *, now: float) -> list[dict[str, Any]]:
    """Header, fields, arguments and controls: for lists such as ``/hitl pending``."""
    blocks = card(a, now=now)
    keep = [blocks[0], blocks[1], *_action_blocks(a)[:1]]
    controls = [b for b in blocks if b["type"] == "actions" and str(b.get("block_id", "")).startswith("hitl_actions")]
    return keep + controls


def _fields(a: Approval) -> list[dict[str, Any]]:
    approvers = a.required_role or "any reviewer"
    votes = f" · {len(a.approvers)} of {a.quorum}" if a.quorum > 1 else ""
    requested = who(a.requester) + (f"\nvia {label(a.asked_by, 120)}" if a.asked_by else "")
    return [
        {"type": "mrkdwn", "text": f"*Tier*\n{a.tier} ({label(a.rule, 60)})"},
        {"type": "mrkdwn", "text": f"*Requested by*\n{requested}"},
        {"type": "mrkdwn", "text": f"*Approvers*\n{label(approvers, 60)}{votes}"},
        {"type": "mrkdwn", "text": f"*Expires*\n{when(a.expires_at)}"},
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
    text = json.dumps(a.args, ensure_ascii=False, indent=1)
    body = f"*Exact arguments* (`{label(a.tool, 60)}`)\n{code_block(text, 2400)}"
    if a.approved_args is not None and a.approved_args != a.args:
        after = json.dumps(a.approved_args, ensure_ascii=False, indent=1)
        body = (
            f"*Arguments: before → after* (`{label(a.tool, 60)}`)\n{code_block(text, 1200)}\n{code_block(after, 1200)}"
        )
    return [{"type": "section", "text": {"type": "mrkdwn", "text": body, "verbatim": True}}]


def _decision_line(d: Decision) -> str:
    verb = {
        DecisionKind.APPROVE: "approved",
        DecisionKind.REJECT: "rejected",
        DecisionKind.MODIFY: "modified and approved",
        DecisionKind.TRUST: "approved and trusted for this session",
        DecisionKind.FEEDBACK: "sent feedback",
    }[d.kind]
    return f"{who(d.reviewer)} {verb} {when(d.at)} via {label(d.via, 20)}"


def _outcome(a: Approval) -> dict[str, Any]:
    lines = [f"{_ICONS[a.status]} *{_TITLES[a.status]}*"]
    lines += [_decision_line(d) for d in a.decisions[-5:]]
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
    return a.tool.startswith(DOUBT)


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
    stop = _confirm("Stop the run?", "Nothing more runs. You will be asked for a reason.", "Stop", danger=True)
    buttons = [
        _button(ACTION_FEEDBACK, "Mark done", value, style="primary"),
        _button(ACTION_APPROVE, "Run again", value, confirm=again),
        _button(ACTION_REJECT, "Stop", value, style="danger", confirm=stop),
    ]
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def _controls(a: Approval) -> dict[str, Any]:
    if _in_doubt(a):
        return _doubt_controls(a)
    value = button_value(a)
    reject = _confirm(
        "Reject this action?", f"{a.tool} will not run. You will be asked for a reason.", "Reject", danger=True
    )
    buttons = [
        _button(ACTION_APPROVE, "Approve", value, style="primary"),
        _button(ACTION_REJECT, "Reject", value, style="danger", confirm=reject),
    ]
    if a.modifiable and not a.tool.startswith(("gate:", "review:", DOUBT)):
        buttons.append(_button(ACTION_MODIFY, "Modify", value))
    if a.tool.startswith(("gate:", "review:")):
        buttons.append(_button(ACTION_FEEDBACK, "Send feedback", value))
    if a.trustable and a.quorum == 1:
        buttons.append(_button(ACTION_TRUST, "Trust for session", value))
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}
