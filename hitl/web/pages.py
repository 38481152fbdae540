"""The web inbox's pages as server-rendered HTML: the decision page draws the one view of an approval
(:class:`~hitl.engine.domain.presentation.Presentation`, the card's) and the forms that decide; every text from the
approval is escaped, and the untrusted evidence sits apart, after the controls, in a box of its own. No script.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from typing import Any

from hitl.bot.views.arguments import CARD_VALUES_BUDGET
from hitl.bot.views.controls import trust_scope
from hitl.bot.views.form_errors import REASON_FIELD
from hitl.bot.views.modals import CONFIRM_FIELD
from hitl.engine.domain.consequences import WHAT_WILL_HAPPEN, Consequence
from hitl.engine.domain.display import excerpt, lookalikes, reveal
from hitl.engine.domain.drift import ConsequenceDrift
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Status
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.spot_checks import is_spot_check

__all__ = ["decided_by", "decision_page", "message_page", "shown_evidence"]

STYLESHEET = "/inbox/static/inbox.css"


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def layout(title: str, body: str, *, reviewer: str | None = None, csrf: str | None = None) -> str:
    """A whole page: the header (who is signed in, Sign out) around ``body`` (already escaped HTML)."""
    who = ""
    if reviewer is not None and csrf is not None:
        who = (
            f'<span class="who">Signed in as <b>{_e(reviewer)}</b></span>'
            f'<form method="post" action="/auth/logout" class="logout">{_hidden("csrf", csrf)}'
            '<button type="submit">Sign out</button></form>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_e(title)} · hitl</title><link rel="stylesheet" href="{STYLESHEET}"></head><body>'
        f'<header><a href="/inbox" class="home">hitl web inbox</a>{who}</header><main>{body}</main></body></html>'
    )


def _hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{_e(name)}" value="{_e(value)}">'


def message_page(title: str, text: str, *, link: tuple[str, str] | None = None) -> str:
    """A page that only says something (a refusal, a sign-in that failed), with a way on."""
    more = f'<p><a href="{_e(link[0])}">{_e(link[1])}</a></p>' if link else ""
    return layout(title, f"<h1>{_e(title)}</h1><p>{_e(text)}</p>{more}")


_MOST_PER_VALUE = 1200
_LEAST_PER_VALUE = 120


def _fields(a: Approval, view: Presentation) -> str:
    """The arguments as the card draws them: each value within its share of the card's bounds, cut at a grapheme
    boundary saying so, with a link to it in full (a page that asks the same authorization as Slack's view)."""
    share = max(_LEAST_PER_VALUE, min(_MOST_PER_VALUE, CARD_VALUES_BUDGET // max(len(view.fields), 1)))
    rows = []
    for index, f in enumerate(view.fields):
        warn = "".join(f'<li class="warn">{_e(w)}</li>' for w in f.value.warnings)
        help_ = f'<p class="help">{_e(f.help)}</p>' if f.help else ""
        currency = f' <span class="currency">{_e(f.currency)}</span>' if f.currency else ""
        start, covered = excerpt(a.execute_args.get(f.name), share) if f.name in a.execute_args else (f.value.text, 0)
        cut = ""
        if start != f.value.text:  # one count everywhere: the value's own characters, as the card says it
            cut = (
                f'<p class="cut">Cut: the first {covered:,} of {f.value.length:,} characters. '
                f'<a href="/inbox/approvals/{_e(a.id)}/values/{index}">Show {_e(f.label[:30])} in full '
                f"({f.value.length:,} characters)</a></p>"
            )
        rows.append(
            f'<dt>{_e(f.label)}{currency} <span class="kind">{_e(f.value.kind)}</span></dt>'
            f'<dd><pre class="value">\n{_e(start)}</pre>{cut}{help_}'
            + (f'<ul class="warnings">{warn}</ul>' if warn else "")
            + "</dd>"
        )
    return f'<dl class="fields">{"".join(rows)}</dl>'


def _changes(view: Presentation) -> str:
    if not view.changes:
        return ""
    rows = "".join(
        f'<li><b>{_e(c.name)}</b>: <pre class="value">\n{_e(c.before.text)}</pre> → <pre class="value">\n'
        f"{_e(c.after.text)}</pre></li>"
        for c in view.changes
    )
    return f'<section class="changes"><h2>Changed</h2><ul>{rows}</ul></section>'


def _form(a: Approval, view: Presentation, csrf: str, decision: str, label: str, inner: str, cls: str) -> str:
    hidden = "".join(
        _hidden(k, v)
        for k, v in (
            ("csrf", csrf),
            ("decision", decision),
            ("expected_version", view.version),
            ("action_hash", view.action_hash),
            ("view_digest", view.digest()),
        )
    )
    return (
        f'<form method="post" action="/inbox/approvals/{_e(a.id)}/decisions" class="decide {cls}">'
        f'{hidden}{inner}<button type="submit">{_e(label)}</button></form>'
    )


def _under(error: str | None) -> str:
    """A field's error, under it (Slack's form shows the same words there)."""
    return f'<span class="field-error" role="alert">{_e(error)}</span>' if error else ""


def _reason(required: bool, label: str = "Reason", error: str | None = None) -> str:
    req = " required" if required else ""
    said = " (required)" if required else " (optional)"
    return f'<label>{_e(label)}{said}<textarea name="reason"{req}></textarea>{_under(error)}</label>'


def _editable(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _input(name: str, value: Any) -> str:
    """A Modify field holding ``value`` as it runs: text with a line break in a text area (an input would drop the
    break, and a field left alone would then change the value)."""
    shown = _editable(value)
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        # HTML drops one line break right after <textarea> (and <pre>): ours, so a value starting with one keeps it
        return f'<textarea name="arg:{_e(name)}">\n{_e(shown)}</textarea>'
    return f'<input name="arg:{_e(name)}" value="{_e(shown)}">'


def _controls(a: Approval, view: Presentation, csrf: str, *, halted: str | None, errors: dict[str, str]) -> str:
    """The forms that decide ``a``; ``errors``: what was wrong with the form just sent, under each field."""

    def confirm(kind: str) -> str:
        return "".join(
            f'<label>Type the {_e(name)} to confirm<input name="confirm:{_e(name)}" autocomplete="off" required>'
            f"{_under(errors.get(f'{kind}:{CONFIRM_FIELD}{name}'))}</label>"
            for name in a.confirm
        )

    def reason(kind: str, required: bool) -> str:
        return _reason(required, error=errors.get(f"{kind}:{REASON_FIELD}"))

    if is_spot_check(a):  # as the card asks it: it already ran, so only whether it looked right
        flag = '<p class="help">It already ran. A flag records that it was wrong and counts as a correction.</p>'
        forms = [
            _form(a, view, csrf, "approve", "Looks right", "", "approve"),
            _form(a, view, csrf, "reject", "Flag", flag + reason("reject", a.reason_required), "reject"),
        ]
        return f'<section class="controls"><h2>Decide</h2>{"".join(forms)}</section>'
    if halted is not None:
        notice = f'<p class="halted" role="alert">Stopped: {_e(halted)}. Approving waits; rejecting still works.</p>'
        reject = _form(a, view, csrf, "reject", "Reject", reason("reject", a.reason_required), "reject")
        return f'<section class="controls"><h2>Decide</h2>{notice}{reject}</section>'
    approve_reason = reason("approve", True) if a.approve_reason_required else ""
    forms = [_form(a, view, csrf, "approve", "Approve", confirm("approve") + approve_reason, "approve")]
    forms.append(_form(a, view, csrf, "reject", "Reject", reason("reject", a.reason_required), "reject"))
    if a.modifiable and a.kind not in (ApprovalKind.GATE, ApprovalKind.REVIEW, ApprovalKind.DOUBT):
        labels = {f.name: f.label for f in view.fields}  # the declared schema's titles, as the card's
        inputs = "".join(
            f"<label>{_e(labels.get(name, name))}{_input(name, value)}</label>"
            for name, value in a.execute_args.items()
        )
        note = '<p class="help">Fields left alone keep their values; non-text values are JSON.</p>'
        forms.append(_form(a, view, csrf, "modify", "Modify and approve", note + inputs + confirm("modify"), "modify"))
    if a.kind in (ApprovalKind.GATE, ApprovalKind.REVIEW):
        feedback = '<label>Feedback<textarea name="reason" required></textarea></label>'
        forms.append(_form(a, view, csrf, "feedback", "Send feedback", feedback, "feedback"))
    if a.trustable and a.quorum == 1 and not a.asks_attention:
        consent = f'<p class="consent">{_e(trust_scope(a))}</p>'
        forms.append(_form(a, view, csrf, "trust", "Approve and trust", consent, "trust"))
    return f'<section class="controls"><h2>Decide</h2>{"".join(forms)}</section>'


def shown_evidence(evidence: str) -> str:
    """The evidence as the page shows it, whole: every hidden or control character marked where it was, as on the
    card (line breaks and tabs kept)."""
    return reveal(evidence, keep="\n\t")[0]


def _consequence(consequence: Consequence | None, title: str = WHAT_WILL_HAPPEN) -> str:
    """What will happen, apart from hitl's own words: the tool's output whole, escaped, in a box of its own."""
    if consequence is None:
        return ""
    lines = consequence.lines()
    said = "computed by the tool's own code from these arguments" if consequence.shown else "not computed"
    marks = list(dict.fromkeys(w for _, warnings in lines for w in warnings))
    look = f'<p class="look-closely" role="note">⚠️ <b>Look closely:</b> {_e("; ".join(marks))}</p>' if marks else ""
    return (
        f'<section class="consequence"><h2>{_e(title)} <span class="untrusted">{said}, shown as plain '
        f'text</span></h2><pre class="consequence-text">{_e(chr(10).join(line for line, _ in lines))}</pre>'
        f"{look}</section>"
    )


def _drift(drift: ConsequenceDrift | None) -> str:
    """An approval asked again because its consequence drifted: hitl's notice, then what was approved."""
    if drift is None:
        return ""
    notice = f'<p class="drift" role="alert">⚠️ <b>{_e(drift.notice)}</b></p>'
    return notice + _consequence(drift.seen, "What was approved")


def _withdrawn(entry: AuditEntry | None) -> str:
    """Who withdrew the approval's go, when, through what, and why: hitl's line, then their reason apart in a box
    of its own, inert (escaped, its hidden characters shown as [U+XXXX]), with its look-alike letters and hidden
    characters named under it as a value's are."""
    if entry is None:
        return ""
    # Its detail is "withdrawal via <surface>: <reason>" (hitl.engine.receipts.withdrawing).
    via, _, reason = entry.detail.removeprefix("withdrawal via ").partition(": ")
    shown, hidden = reveal(reason, keep="\n\t")
    marks = [*lookalikes(reason)]
    if hidden:
        marks.append(f"{hidden} invisible, control or direction-changing character{'s' if hidden != 1 else ''}")
    warn = "".join(f'<li class="warn">{_e(w)}</li>' for w in marks)
    return (
        f'<section class="withdrawn" role="status"><h2>Withdrawn</h2><p>↩️ <b>Withdrawn</b> by '
        f"<b>{_e(reveal(entry.actor)[0])}</b> ({_e(via)}) at {_e(_utc(entry.at))}: its receipts are refused from "
        'now on, and nothing runs by it.</p><h3>Their reason <span class="untrusted">shown as plain text</span></h3>'
        f'<pre class="value">\n{_e(shown)}</pre>' + (f'<ul class="warnings">{warn}</ul>' if warn else "") + "</section>"
    )


def decision_page(
    a: Approval,
    view: Presentation,
    *,
    reviewer: str,
    csrf: str,
    can_decide: bool,
    error: str | None = None,
    halted: str | None = None,
    notice: str | None = None,
    field_errors: dict[str, str] | None = None,
    delivery: list[str] | None = None,
    withdrawn: AuditEntry | None = None,
) -> str:
    """One approval: its view as the card draws it, the forms that decide (for one who may), then the evidence.
    ``halted``: the stop switch's message when it covers the approval's tool (then Reject alone is offered);
    ``notice``: what this reader alone is told (a practice twin's note, once, to its decider); ``field_errors``:
    what was wrong with the form just sent, keyed ``decision:field``, each drawn under its field; ``delivery``: how
    it reached people beyond its card (its e-mail), one line each; ``withdrawn``: the audit entry of its withdrawal,
    if its go was withdrawn (who, when, why)."""
    reasons = "".join(f"<li>{_e(r)}</li>" for r in view.reasons)
    meta = (
        f"Asked by <b>{_e(view.requester)}</b>"
        + (f" · role {_e(view.role)}" if view.role else "")
        + f" · {view.approvals} of {view.quorum} approval{'s' if view.quorum != 1 else ''}"
        + f" · expires {_e(_utc(view.expires_at))} · <code>{_e(view.approval_id)}</code>"
    )
    marked = "⚠ " if view.look_closely else ""  # the headline carries its values' marks, as the card's does
    look = ""
    if view.look_closely:
        said = view.look_closely.removeprefix("look closely: ")
        look = f'<p class="look-closely" role="note">⚠️ <b>Look closely:</b> {_e(said)}</p>'
    parts = [
        f'<h1 class="heading">{_e(marked + view.heading)}</h1>',
        look,
        f'<p class="error" role="alert">{_e(error)}</p>' if error else "",
        f'<p class="notice" role="status">{_e(notice)}</p>' if notice else "",
        f'<section class="why"><h2>Why it needs a person</h2><ul>{reasons}</ul></section>' if reasons else "",
        _fields(a, view),
        _changes(view),
        _drift(view.drift),
        _consequence(view.consequence),
        f'<p class="meta">{meta}</p>',
        f'<p class="outcome">{_e(view.outcome)}</p>' if view.outcome else "",
        f'<p class="already" role="status">{_e(decider)}</p>' if (decider := decided_by(a)) else "",
        _withdrawn(withdrawn),
    ]
    if delivery:
        lines = "".join(f"<li>{_e(line)}</li>" for line in delivery)
        parts.append(f'<section class="delivery"><h2>How it reached people</h2><ul>{lines}</ul></section>')
    if a.status is Status.PENDING:
        refused = '<p class="note">You may not decide this one.</p>'
        parts.append(_controls(a, view, csrf, halted=halted, errors=field_errors or {}) if can_decide else refused)
    if view.evidence:
        parts.append(
            '<section class="evidence"><h2>Untrusted evidence <span class="untrusted">sent with the request, shown '
            "as plain text: do not follow instructions in it</span></h2>"
            # A line break after <pre> is dropped by every HTML parser: ours, so evidence that starts with one keeps it
            f'<pre class="evidence-text">\n{_e(shown_evidence(view.evidence))}</pre></section>'
        )
    return layout(view.heading, "".join(parts), reviewer=reviewer, csrf=csrf)


_UNDECIDED = frozenset({Status.PENDING, Status.EXPIRED, Status.CANCELLED})
"""States no reviewer's decision ended (a vote before an expiry or a cancellation decided nothing)."""


def decided_by(a: Approval) -> str | None:
    """Who decided ``a`` and on which channel (``Already decided by U_FIN1 (slack)``), for a link opened after a
    decision on any channel (a mailed one most often): None while nobody's decision has ended it."""
    if a.status in _UNDECIDED:
        return None
    said = [f"{d.reviewer} ({d.via})" for d in a.decisions if d.kind is not DecisionKind.FEEDBACK]
    return f"Already decided by {' and '.join(dict.fromkeys(said))}" if said else None


STYLES = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1c1d;background:#f8f8f8}
header{display:flex;gap:1em;align-items:center;padding:.6em 1em;background:#3f0e40;color:#fff}
header a{color:#fff;font-weight:600;text-decoration:none;margin-right:auto}
header form{margin:0}
main{max-width:860px;margin:1em auto;padding:0 1em}
h1{font-size:1.3em}
dl.fields dt{font-weight:600;margin-top:.6em}
.kind{font-weight:400;color:#666;font-size:.85em}
pre.value{white-space:pre-wrap;word-break:break-all;background:#fff;border:1px solid #ddd;
  padding:.3em .5em;margin:.2em 0}
.warn{color:#8a4b00}
.consequence pre{white-space:pre-wrap;word-break:break-all;background:#fff;border:1px dashed #1264a3;padding:.3em .5em}
.look-closely{color:#8a4b00}
.notice{background:#e8f5fa;border:1px solid #1264a3;padding:.5em}
.field-error{color:#b3122f;font-size:.9em}
.error,.halted{background:#fde8e8;border:1px solid #d33;padding:.5em}
.controls form{background:#fff;border:1px solid #ddd;padding:.6em;margin:.5em 0;display:grid;gap:.4em}
.controls label{display:grid;gap:.2em}
.controls button{justify-self:start;padding:.4em 1em}
.approve button{background:#007a5a;color:#fff;border:0}
.reject button{background:#e01e5a;color:#fff;border:0}
.evidence{margin-top:2em;border-left:4px solid #999;padding-left:1em;color:#444}
.evidence pre{white-space:pre-wrap;word-break:break-all;font-family:ui-monospace,monospace;font-weight:400;
  max-height:30em;overflow:auto}
.untrusted{font-size:.75em;font-weight:400;color:#8a4b00}
.filters{display:flex;flex-wrap:wrap;gap:.3em .6em;align-items:center;background:#fff;border:1px solid #ddd;
  padding:.6em}
.filters input,.filters select{max-width:100%;min-width:0}
.pair{display:inline-flex;gap:.3em;align-items:center;max-width:100%}
ul.inbox li,ul.history li{margin:.4em 0;overflow-wrap:anywhere}
.why,.by{color:#454245}
.scroll{overflow-x:auto;max-width:100%}
.scroll table{border-collapse:collapse;background:#fff}
.scroll th,.scroll td{border:1px solid #ddd;padding:.2em .5em;text-align:right}
.scroll th[scope=row]{text-align:left}
.group{background:#e8f5fa;border:1px solid #1264a3;padding:0 .3em;font-size:.85em}
"""
"""The pages' one stylesheet, served by hitl (nothing from a third party)."""
