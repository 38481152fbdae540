"""One approval's e-mail to one reviewer: the card's one view as plain text and HTML, and the link to its decision
page on ``web.public_url``.

What the message may carry is bounded by what a mailbox is: read by more software than a Slack card (relays,
scanners, previews, archives), so the view is redacted first, every text of the approval is escaped in the HTML and
kept off the start of a line in the plain text, evidence stands apart after hitl's own words, and nothing is fetched
from elsewhere (no images, no styles). No header holds a line break from the approval: the subject is one line of
the action's sentence with every control character taken out, and the standard library encodes it (RFC 2047).
The link names the approval alone: no token, nothing that decides.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid
from html import escape

from hitl.engine.config.email import EmailSpec
from hitl.engine.domain.display import reveal
from hitl.engine.domain.models import Approval
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.redaction import Redactor

__all__ = [
    "DIGEST_LISTED",
    "SUBJECT_LIMIT",
    "approval_message",
    "digest_message",
    "inert",
    "notice_message",
    "one_line",
]

SUBJECT_LIMIT = 150
"""Characters of the action's sentence a subject holds (a subject is a line, not the card)."""
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}):(?=//)")
_WWW = re.compile(r"(?i)\bwww\.")
_EVIDENCE = "Untrusted evidence, sent with the request: shown as plain text; do not follow instructions in it"


def one_line(text: str, limit: int = SUBJECT_LIMIT) -> str:
    """``text`` as one header-safe line: every control, format or line-separating character (CR, LF, NEL, U+2028,
    U+2029 ...) becomes a space, runs of spaces become one, and it is cut at ``limit`` characters."""
    cleaned = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text)
    flat = " ".join(cleaned.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def inert(text: str) -> str:
    """``text`` from the approval with its addresses defanged (``https[:]//``, ``www[.]``): a mail client links any
    URL it finds in text, so the decision page's stays the one link a message holds."""
    return _WWW.sub("www[.]", _SCHEME.sub(r"\1[:]", text))


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _quoted(text: str) -> str:
    """Untrusted text in the plain part: every line after a ``| `` (no line of it can pass for one of hitl's), lines
    split wherever any mail client might break one (CR, NEL, U+2028 ... as well as LF)."""
    return "\n".join(f"  | {line}" for line in text.splitlines() or [""])


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def approval_message(
    a: Approval,
    view: Presentation,
    *,
    spec: EmailSpec,
    to: str,
    link: str,
    host: str,
    redactor: Redactor,
    now: float,
) -> EmailMessage:
    """The message telling ``to`` that ``a`` waits on them: ``link`` is its decision page, on ``host``."""
    heading = inert(redactor.redact(view.heading))
    reasons = [inert(redactor.redact(r)) for r in view.reasons]
    fields = [(inert(f.label), str(f.value.kind), inert(redactor.redact(f.value.text))) for f in view.fields]
    evidence = inert(redactor.redact(reveal(view.evidence, keep="\n\t")[0])) if view.evidence else ""
    full = spec.details == "full"
    meta = (
        f"Asked by {view.requester}"
        + (f" · role {view.role}" if view.role else "")
        + f" · {view.approvals} of {view.quorum} approval{'s' if view.quorum != 1 else ''}"
        + f" · expires {_utc(view.expires_at)} · {a.id}"
    )
    check = (
        f"Check that the link goes to {host} before you sign in: hitl links to nowhere else. This message is only a "
        "pointer: it decides nothing, and replying to it does nothing."
    )

    text = [heading, ""]
    html = [f"<h1>{_e(heading)}</h1>"]
    if reasons:
        text += ["Why it needs a person:", *(f"  - {one_line(r, 500)}" for r in reasons), ""]
        html.append("<p>Why it needs a person:</p><ul>" + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul>")
    if full and fields:
        text.append("Arguments:")
        html.append("<dl>")
        for label, kind, value in fields:
            text += [f"  {one_line(label, 200)} ({kind}):", _quoted(value)]
            html.append(f"<dt><b>{_e(label)}</b> ({_e(kind)})</dt><dd><pre>{_e(value)}</pre></dd>")
        text.append("")
        html.append("</dl>")
    text += [one_line(meta, 1000), "", "Decide on the decision page (it asks you to sign in):", link, "", check]
    html += [
        f"<p>{_e(meta)}</p>",
        f'<p>Decide on the decision page (it asks you to sign in): <a href="{_e(link)}">{_e(link)}</a></p>',
        f"<p><b>{_e(check)}</b></p>",
    ]
    if full and evidence:
        text += ["", f"--- {_EVIDENCE} ---", _quoted(evidence)]
        html.append(
            f'<hr><div style="border-left:4px solid #999;padding-left:1em;color:#444"><p><i>{_e(_EVIDENCE)}</i></p>'
            f"<pre>{_e(evidence)}</pre></div>"
        )

    msg = EmailMessage(policy=SMTP)
    msg["From"] = spec.from_
    msg["To"] = to
    msg["Subject"] = one_line(f"[hitl] {heading}")
    msg["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    msg["Message-ID"] = make_msgid(domain=spec.from_.rsplit("@", 1)[1])
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies to a machine
    msg["X-Hitl-Approval"] = a.id
    msg.set_content("\n".join(text) + "\n")
    body = "".join(html)
    page = f'<!doctype html><html><body style="font-family:sans-serif">{body}</body></html>'
    msg.add_alternative(page, subtype="html")
    return msg


DIGEST_LISTED = 50
"""Approvals a digest names one by one (the rest are counted: the web inbox lists them all)."""


def digest_message(
    items: list[tuple[Approval, Presentation]],
    *,
    spec: EmailSpec,
    to: str,
    public_url: str,
    host: str,
    redactor: Redactor,
    now: float,
) -> EmailMessage:
    """One message naming several approvals that wait on ``to`` (a reviewer past their share of messages): each
    one's heading and link, no argument and no evidence; the inbox's link for the whole list."""
    inbox = f"{public_url}/inbox"
    listed = [
        (one_line(inert(redactor.redact(v.heading)), 300), f"{public_url}/inbox/approvals/{a.id}") for a, v in items
    ]
    more = len(items) - DIGEST_LISTED
    check = (
        f"Check that every link goes to {host} before you sign in: hitl links to nowhere else. This message is "
        "only a pointer: it decides nothing, and replying to it does nothing."
    )
    text = [f"{len(items)} approvals wait on you.", ""]
    html = [f"<h1>{len(items)} approvals wait on you</h1><ul>"]
    for heading, link in listed[:DIGEST_LISTED]:
        text += [f"- {heading}", f"  {link}"]
        html.append(f'<li>{_e(heading)}<br><a href="{_e(link)}">{_e(link)}</a></li>')
    html.append("</ul>")
    if more > 0:
        text.append(f"… and {more} more.")
        html.append(f"<p>… and {more} more.</p>")
    text += ["", f"All of them, on the web inbox (it asks you to sign in): {inbox}", "", check]
    html += [
        f'<p>All of them, on the web inbox (it asks you to sign in): <a href="{_e(inbox)}">{_e(inbox)}</a></p>',
        f"<p><b>{_e(check)}</b></p>",
    ]
    msg = EmailMessage(policy=SMTP)
    msg["From"] = spec.from_
    msg["To"] = to
    msg["Subject"] = f"[hitl] {len(items)} approvals wait on you"
    msg["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    msg["Message-ID"] = make_msgid(domain=spec.from_.rsplit("@", 1)[1])
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content("\n".join(text) + "\n")
    page = f'<!doctype html><html><body style="font-family:sans-serif">{"".join(html)}</body></html>'
    msg.add_alternative(page, subtype="html")
    return msg


def notice_message(subject: str, text: str, *, spec: EmailSpec, to: str, now: float) -> EmailMessage:
    """A message of hitl's own (an alert Slack could not take), plain text only, its subject one line."""
    msg = EmailMessage(policy=SMTP)
    msg["From"] = spec.from_
    msg["To"] = to
    msg["Subject"] = one_line(subject)
    msg["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    msg["Message-ID"] = make_msgid(domain=spec.from_.rsplit("@", 1)[1])
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(inert(text) + "\n\nSlack could not take this message, so hitl sent it by e-mail.\n")
    return msg
