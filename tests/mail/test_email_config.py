"""``email:`` and ``contacts:`` in hitl.yaml, checked at load: each bad value refused with a coded error naming its
key and line, plain SMTP to another machine refused under ``production: true``, and e-mail without a decision page
to point at refused."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Tier
from hitl.engine.errors import EngineError, ErrorCode

BASE = """\
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
web: {public_url: "https://hitl.example.com", oidc: {issuer: "https://id.example.com", client_id: hitl}}
"""


def config(email: str, contacts: str = "contacts: {U_SUPPORT1: {email: s1@example.com}}\n", extra: str = "") -> str:
    return BASE + email + contacts + extra


def refused(text: str) -> str:
    with pytest.raises(EngineError) as caught:
        parse_config(text, source="hitl.yaml")
    assert caught.value.code is ErrorCode.POLICY_INVALID
    return caught.value.message


def test_a_whole_email_section_loads() -> None:
    cfg = parse_config(
        config(
            "email:\n  smtp_url: smtps://mail.example.com\n  from: hitl@example.com\n  details: full\n"
            "  username_env: HITL_SMTP_USER\n  password_env: HITL_SMTP_PASSWORD\n  tools: [refund]\n"
            "  tiers: [escalate]\n",
            extra="production: true\n",
        )
    )
    assert cfg.email is not None and cfg.email.implicit_tls and cfg.email.port == 465
    assert cfg.email.from_ == "hitl@example.com" and cfg.email.details == "full"
    assert cfg.email.mails("refund", Tier.APPROVE) and cfg.email.mails("other", Tier.ESCALATE)
    assert not cfg.email.mails("other", Tier.APPROVE)
    assert cfg.contacts["U_SUPPORT1"].email == "s1@example.com"
    plain = parse_config(config("email: {smtp_url: 'smtp://127.0.0.1:2525', from: hitl@example.com}\n"))
    assert plain.email is not None and plain.email.details == "summary" and plain.email.port == 2525
    assert not plain.email.mails("refund", Tier.ESCALATE)  # nothing is mailed unless named


@pytest.mark.parametrize(
    ("email", "contacts", "said"),
    [
        ("email: {smtp_url: 'http://mail.example.com', from: h@example.com}\n", "", "email.smtp_url"),
        ("email: {smtp_url: 'smtp://u:p@mail.example.com', from: h@example.com}\n", "", "username_env"),
        ("email: {smtp_url: 'smtps://mail.example.com', starttls: true, from: h@example.com}\n", "", "starttls"),
        ("email: {smtp_url: 'smtp://127.0.0.1', from: 'h@example.com\\r\\nBcc: x@evil.example'}\n", "", "email.from"),
        ("email: {smtp_url: 'smtp://127.0.0.1', from: h@example.com, password_env: P}\n", "", "go together"),
        (
            "email: {smtp_url: 'smtp://127.0.0.1', from: h@example.com, username_env: 'a b', password_env: P}\n",
            "",
            "username_env",
        ),
        ("email: {smtp_url: 'smtp://127.0.0.1', from: h@example.com, details: everything}\n", "", "email.details"),
        ("email: {smtp_url: 'smtp://127.0.0.1', from: h@example.com, tiers: [urgent]}\n", "", "email.tiers"),
        ("", "contacts: {U_SUPPORT1: {email: 'not an address'}}\n", "contacts.U_SUPPORT1.email"),
        (
            "",
            'contacts: {U_SUPPORT1: {email: "s1@example.com\\r\\nBcc: x@evil.example"}}\n',
            "contacts.U_SUPPORT1.email",
        ),
        ("", "contacts: {U_SUPPORT1: {email: s1@example.com, phone: '+1'}}\n", "contacts.U_SUPPORT1.phone"),
        ("", "contacts: {U_NOBODY: {email: n@example.com}}\n", "U_NOBODY"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(email: str, contacts: str, said: str) -> None:
    assert said in refused(config(email, contacts))


def test_email_needs_the_decision_page_it_links_to() -> None:
    text = "roles: {support: [U_SUPPORT1]}\nemail: {smtp_url: 'smtp://127.0.0.1', from: h@example.com}\n"
    assert "'email': needs web:" in refused(text)


@pytest.mark.parametrize("host", ["mail.example.com", "10.0.0.5", "[2001:db8::1]"])
def test_plain_smtp_to_another_machine_is_refused_in_production(host: str) -> None:
    email = f"email: {{smtp_url: 'smtp://{host}:25', from: h@example.com}}\n"
    assert parse_config(config(email)).email is not None  # allowed outside production (a relay on a trusted LAN)
    said = refused(config(email, extra="production: true\n"))
    assert "plain SMTP" in said and "smtps://" in said


@pytest.mark.parametrize(
    "url", ["smtp://127.0.0.1:25", "smtp://localhost:25", "smtp://[::1]:25", "smtps://mail.example.com"]
)
def test_loopback_relays_and_tls_are_allowed_in_production(url: str) -> None:
    email = f"email: {{smtp_url: '{url}', from: h@example.com}}\n"
    assert parse_config(config(email, extra="production: true\n")).email is not None


def test_starttls_makes_a_remote_relay_acceptable_in_production() -> None:
    email = "email: {smtp_url: 'smtp://mail.example.com:587', starttls: true, from: h@example.com}\n"
    cfg = parse_config(config(email, extra="production: true\n"))
    assert cfg.email is not None and cfg.email.starttls and cfg.email.port == 587


def test_an_alert_role_must_be_a_role() -> None:
    email = "email: {smtp_url: 'smtp://127.0.0.1', from: h@example.com, alert_role: ops}\n"
    assert "email.alert_role names 'ops'" in refused(config(email))
    ok = "email: {smtp_url: 'smtp://127.0.0.1', from: h@example.com, alert_role: support}\n"
    cfg = parse_config(config(ok))
    assert cfg.email is not None and cfg.email.alert_role == "support"


def test_a_scheme_in_capitals_is_the_same_scheme() -> None:
    """URL schemes are case-insensitive (RFC 3986): ``SMTPS://`` is TLS from the first byte on port 465, never plain
    SMTP to port 25, and ``SMTP://`` to another machine is still plain under production."""
    email = "email: {smtp_url: 'SMTPS://mail.example.com', from: h@example.com}\n"
    cfg = parse_config(config(email, extra="production: true\n"))
    assert cfg.email is not None and cfg.email.implicit_tls and cfg.email.port == 465
    plain = "email: {smtp_url: 'SMTP://mail.example.com', from: h@example.com}\n"
    assert "plain SMTP" in refused(config(plain, extra="production: true\n"))
