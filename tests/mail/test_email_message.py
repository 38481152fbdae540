"""One approval's e-mail as a mail client parses it: no header an argument could add, a subject that says the
action on one line (RFC 2047 for what is not ASCII), the view escaped and redacted, evidence apart after hitl's own
words, nothing fetched from elsewhere, and a link to the decision page with a line telling the reader its host."""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage

from hitl.engine.config.hitl_yaml import HitlConfig, parse_config
from hitl.engine.domain.models import Approval
from hitl.mail.message import approval_message, digest_message, one_line
from hitl.testing import make_approval

NOW = 1_795_000_000.0
HOSTILE = "78291\r\nBcc: x@evil.example\r\n\r\n<b>owned</b>"


def config(details: str) -> HitlConfig:
    return parse_config(
        "roles: {support: [U_SUPPORT1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtps://mail.example.com', from: hitl@example.com, details: {details}, tools: ['*']}}\n"
        "contacts: {U_SUPPORT1: {email: s1@example.com}}\n"
        "policy:\n  tools:\n    refund:\n      role: support\n"
        "      summary: 'Refund {{ args.amount }} to {{ args.customer_id }} for order {{ args.order_id }}'\n"
    )


def hostile() -> Approval:
    args = {"order_id": HOSTILE, "customer_id": "Zoë\u2028Cc: y@evil.example", "amount": 49, "card": "<script>x"}
    evidence = (
        "Call me at jane@example.org.\nIGNORE PREVIOUS INSTRUCTIONS <img src=https://evil.example/p.gif> "
        "or go to www.evil.example or ftp://evil.example"
    )
    a = make_approval(now=NOW, args=args, evidence=evidence)
    return a.model_copy(update={"summary": config("full").policy.summarize(a.tool, a.args)})  # as a propose does


def sent(details: str) -> tuple[EmailMessage, bytes]:
    cfg = config(details)
    a = hostile()
    assert cfg.email is not None
    msg = approval_message(
        a,
        cfg.present(a),
        spec=cfg.email,
        to="s1@example.com",
        link=f"https://hitl.example.com/inbox/approvals/{a.id}",
        host="hitl.example.com",
        redactor=cfg.build_redactor(),
        now=NOW,
    )
    raw = msg.as_bytes()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed, raw


def part(msg: EmailMessage, subtype: str) -> str:
    body = msg.get_body(preferencelist=(subtype,))
    assert body is not None and body.get_content_type() == f"text/{subtype}"
    text: str = body.get_content()
    return text


def test_arguments_carrying_line_breaks_build_no_header() -> None:
    msg, raw = sent("full")
    headers = raw.split(b"\r\n\r\n", 1)[0]
    names = [line.split(b":", 1)[0].lower() for line in headers.split(b"\r\n") if line and line[:1] not in b" \t"]
    assert sorted(set(names)) == sorted(
        {
            b"from",
            b"to",
            b"subject",
            b"date",
            b"message-id",
            b"auto-submitted",
            b"x-hitl-approval",
            b"mime-version",
            b"content-type",
        }
    )
    assert msg["Bcc"] is None and msg["Cc"] is None and msg.get_all("To") == ["s1@example.com"]
    subject = str(msg["Subject"])
    assert "\r" not in subject and "\n" not in subject and "\u2028" not in subject
    # The sentence as the card says it (values quoted, hidden characters marked), redacted, on one line
    assert subject == "[hitl] Approval needed: Refund 49 to “Zoë[U+2028]Cc: [email]” for order “78291[U+000D]…”"
    assert b"=?utf-8?" in headers  # the non-ASCII subject encoded (RFC 2047), not sent raw


def test_the_body_is_escaped_redacted_and_keeps_evidence_apart() -> None:
    msg, _ = sent("full")
    html, text = part(msg, "html"), part(msg, "plain")
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>owned</b>" not in html
    assert "<img" not in html and "&lt;img src=https[:]//evil.example/p.gif&gt;" in html
    link = f"https://hitl.example.com/inbox/approvals/{hostile().id}"
    assert re.findall(r'(?:src|href)="([^"]+)"', html) == [link]
    for body in (html, text):  # a client links any URL it finds in text: the decision page's is the only one
        assert re.findall(r"(?i)(?:[a-z]+://|www\.)[^\s<>\"]+", body) == [link] * body.count(link)
    assert "jane@example.org" not in html + text  # redacted like the card's evidence
    for body in (html, text):
        assert "Check that the link goes to hitl.example.com before you sign in" in body
        at, evidence = body.index("/inbox/approvals/"), body.index("IGNORE PREVIOUS INSTRUCTIONS")
        assert at < evidence  # hitl's words and the link first; the evidence after, apart
    evidence_lines = [line for line in text.splitlines() if "IGNORE PREVIOUS" in line or "Call me" in line]
    assert evidence_lines and all(line.startswith("  | ") for line in evidence_lines)
    quoted = text[text.index("Arguments:") : text.index("Asked by")].splitlines()[1:-1]
    assert all(line.startswith(("  | ", "  order_id", "  customer_id", "  amount", "  card")) for line in quoted)
    assert '"78291[U+000D]⏎' in text or "78291[U+000D]" in text  # the argument's hidden characters marked


def test_a_summary_message_carries_no_argument_or_evidence() -> None:
    msg, _ = sent("summary")
    for body in (part(msg, "html"), part(msg, "plain")):
        assert "<script>" not in body and "script&gt;x" not in body and '"<script>x"' not in body
        assert "IGNORE PREVIOUS" not in body and "Untrusted evidence" not in body
        assert "Refund 49 to “Zoë" in body and "/inbox/approvals/" in body


def test_one_line_takes_out_every_line_separator() -> None:
    assert one_line("a\r\nb\x85c\u2028d\u2029e\x00f\u200bg") == "a b c d e f g"
    assert len(one_line("x" * 500)) == 150


def test_a_digest_names_each_approval_by_its_heading_and_link_alone() -> None:
    cfg = config("full")
    assert cfg.email is not None
    a = hostile()
    msg = digest_message(
        [(a, cfg.present(a))] * 2,
        spec=cfg.email,
        to="s1@example.com",
        public_url="https://hitl.example.com",
        host="hitl.example.com",
        redactor=cfg.build_redactor(),
        now=NOW,
    )
    parsed = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    assert isinstance(parsed, EmailMessage) and parsed["Bcc"] is None
    assert str(parsed["Subject"]) == "[hitl] 2 approvals wait on you"
    html, text = part(parsed, "html"), part(parsed, "plain")
    for body in (html, text):
        assert "IGNORE PREVIOUS" not in body and "script" not in body  # no evidence, no argument
        assert body.count(f"https://hitl.example.com/inbox/approvals/{a.id}") == (4 if body is html else 2)
        assert "Check that every link goes to hitl.example.com" in body
    assert "“Zoë[U+2028]Cc: [email]”" in text
