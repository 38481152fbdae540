"""A card's controls: Approve, Reject, Modify, Trust and the rest, each with Slack's own confirmation where it acts
at once, and what a Trust would grant, said before anyone consents to it. Button values carry
``id|version|hash|view`` (:mod:`hitl.bot.requests.button_values`), so a click binds to exactly the action shown, and its
decision records the view the card drew."""

from __future__ import annotations

from typing import Any

from hitl.bot.requests.button_values import button_value
from hitl.engine.domain.models import Approval, ApprovalKind
from hitl.engine.domain.questions import ASK_PERSON
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.service import TRUST_TTL

__all__ = [
    "ACTION_ANSWER",
    "ACTION_APPROVE",
    "ACTION_APPROVE_CONFIRM",
    "ACTION_FEEDBACK",
    "ACTION_MODIFY",
    "ACTION_OPEN_WEB",
    "ACTION_REJECT",
    "ACTION_TRUST",
    "ACTION_VIEW_ALL",
    "button",
    "confirm_dialog",
    "controls",
    "open_in_browser",
    "reason_ask",
    "trust_scope",
    "utc_time",
]

ACTION_APPROVE = "hitl_approve"
ACTION_ANSWER = "hitl_answer"
"""A question's (``ask_person``) Answer button: it opens the answer form."""
ACTION_APPROVE_CONFIRM = "hitl_approve_confirm"
"""Approve on an approval that asks more than a click: it opens the form where the reviewer types what it asks."""
ACTION_REJECT = "hitl_reject"
ACTION_MODIFY = "hitl_modify"
ACTION_TRUST = "hitl_trust"
ACTION_VIEW_ALL = "hitl_view_all"
ACTION_FEEDBACK = "hitl_feedback"
ACTION_OPEN_WEB = "hitl_open_web"
"""The card's "Open in browser" link to its page in the web inbox (Slack opens the URL; the click is only acked)."""


def button(action: str, label: str, value: str, *, style: str | None = None, confirm: Any = None) -> dict[str, Any]:
    """A Block Kit button: ``label`` as plain text, ``value`` as carried, Slack's confirmation first if given."""
    out: dict[str, Any] = {"type": "button", "action_id": action, "text": _plain(label), "value": value}
    if style:
        out["style"] = style
    if confirm:
        out["confirm"] = confirm
    return out


def confirm_dialog(title: str, text: str, yes: str, *, danger: bool = False) -> dict[str, Any]:
    """Slack's own "are you sure?" dialog before a button acts (``text`` cut to Slack's 300 characters)."""
    out = {"title": _plain(title), "text": _plain(text[:300]), "confirm": _plain(yes), "deny": _plain("Cancel")}
    return {**out, "style": "danger"} if danger else out


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def _doubt_controls(a: Approval, value: str) -> dict[str, Any]:
    """Mark done (feedback: what the reviewer found), Run again (approve), Stop (reject)."""
    tool = str(a.args.get("tool", ""))[:60]
    again = confirm_dialog("Run it again?", f"If {tool} did happen, it will happen twice.", "Run again")
    stop = confirm_dialog(
        "Stop the run?", f"Nothing more runs. {reason_ask(required=a.reason_required)}", "Stop", danger=True
    )
    buttons = [
        button(ACTION_FEEDBACK, "Mark done", value, style="primary"),
        button(ACTION_APPROVE, "Run again", value, confirm=again),
        button(ACTION_REJECT, "Stop", value, style="danger", confirm=stop),
    ]
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def _spot_controls(a: Approval, value: str) -> dict[str, Any]:
    """A spot check's answers: it already ran, so the question is only whether it looked right."""
    flag = confirm_dialog(
        "Flag this action?",
        "It already ran. A flag records that it was wrong and counts as a correction. You can say why (optional).",
        "Flag",
        danger=True,
    )
    buttons = [
        button(ACTION_APPROVE, "Looks right", value, style="primary"),
        button(ACTION_REJECT, "Flag", value, style="danger", confirm=flag),
    ]
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def controls(a: Approval, view: str, *, halted: bool = False) -> dict[str, Any]:
    """The buttons of a pending card: a spot check's, an effect in doubt's, or Approve, Reject, Modify, feedback
    and Trust as the approval allows; with ``halted`` (the stop switch), Reject alone. ``view``: the digest of the
    view the card draws, carried by every button that decides."""
    value = button_value(a, view)
    if is_spot_check(a):
        return _spot_controls(a, value)
    if a.kind is ApprovalKind.DOUBT:
        return _doubt_controls(a, value)
    reject = confirm_dialog(
        "Reject this action?",
        f"{a.tool[:80]} will not run. {reason_ask(required=a.reason_required)}",
        "Reject",
        danger=True,
    )
    if halted:  # the stop switch: only Reject
        return {
            "type": "actions",
            "block_id": f"hitl_actions:{a.id}",
            "elements": [button(ACTION_REJECT, "Reject", value, style="danger", confirm=reject)],
        }
    if a.tool == ASK_PERSON:  # a question is answered (an edit adding the answer) or declined, never just approved
        answer = button(ACTION_ANSWER, "Answer…", value, style="primary")
        decline = button(ACTION_REJECT, "Decline", value, style="danger", confirm=reject)
        return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": [answer, decline]}
    # An approval that asks more than a click (a value to type, a reason) is approved through its form.
    approve = button(ACTION_APPROVE_CONFIRM, "Approve…", value, style="primary") if a.asks_attention else None
    buttons = [
        approve or button(ACTION_APPROVE, "Approve", value, style="primary"),
        button(ACTION_REJECT, "Reject", value, style="danger", confirm=reject),
    ]
    if a.modifiable and a.kind not in (ApprovalKind.GATE, ApprovalKind.REVIEW, ApprovalKind.DOUBT):
        buttons.append(button(ACTION_MODIFY, "Modify", value))
    if a.kind in (ApprovalKind.GATE, ApprovalKind.REVIEW):
        buttons.append(button(ACTION_FEEDBACK, "Send feedback", value))
    if a.trustable and a.quorum == 1:
        trust = confirm_dialog("Approve and trust?", trust_scope(a), "Approve and trust")
        buttons.append(button(ACTION_TRUST, "Trust for session", value, confirm=trust))
    return {"type": "actions", "block_id": f"hitl_actions:{a.id}", "elements": buttons}


def open_in_browser(a: Approval, url: str) -> dict[str, Any]:
    """The card's link to its decision page in the web inbox (``web:`` in hitl.yaml): only the approval's id is in
    the address; whoever opens it signs in there as themselves."""
    link = {"type": "button", "action_id": ACTION_OPEN_WEB, "text": _plain("Open in browser"), "url": url}
    return {"type": "actions", "block_id": f"hitl_open:{a.id}", "elements": [link]}


def reason_ask(*, required: bool) -> str:
    """What happens after a Reject confirmation: a form that asks why, required or not."""
    return "You will be asked for a reason (required)." if required else "You can say why (optional)."


def trust_scope(a: Approval, *, granted_at: float | None = None) -> str:
    """What a Trust lets through, said before anyone consents to it and on the card after: whose calls first (the
    grant covers the requester alone), this tool, this session, for how long (until when, once granted), and what
    it never covers. Plain text, at most 300 characters (Slack's limit for a confirmation's text)."""
    ttl = a.metadata.get(TRUST_TTL)
    span = _span(float(ttl)) if isinstance(ttl, int | float) else "the configured time"
    until = (
        f"until {utc_time(granted_at + float(ttl))}" if granted_at is not None and isinstance(ttl, int | float) else ""
    )
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


def utc_time(ts: float) -> str:
    """``ts`` as a UTC date and time (a fallback, and what a Trust's scope names)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
