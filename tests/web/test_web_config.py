"""``web:`` in hitl.yaml: the web inbox's address and OpenID Connect provider, each mistake refused with the
configuration's coded error naming the field."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.errors import EngineError, ErrorCode

GOOD = """
web:
  public_url: https://hitl.example.com/
  oidc:
    issuer: https://id.example.com
    client_id: hitl
    client_secret_env: HITL_OIDC_SECRET
  subjects: {"00u1abc": U_SUPPORT1}
  emails: {"ann@example.com": U_SUPPORT2}
"""


def test_a_web_section_is_read_with_its_defaults() -> None:
    web = parse_config(GOOD + "production: true\n").web
    assert web is not None
    assert web.public_url == "https://hitl.example.com"  # no trailing slash: links are built from it
    assert web.redirect_uri == "https://hitl.example.com/auth/callback"
    assert web.approval_url("apr_1") == "https://hitl.example.com/inbox/approvals/apr_1"
    assert web.oidc.scopes == ["openid", "profile", "email"]
    assert (web.idle_minutes, web.absolute_hours) == (30, 12)
    assert web.subjects == {"00u1abc": "U_SUPPORT1"} and web.secure


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("https://hitl.example.com/", "ftp://hitl.example.com"), "web.public_url must be an absolute http(s) URL"),
        (("https://hitl.example.com/", "http://hitl.example.com"), "web.public_url must use https://"),
        (("https://hitl.example.com/", "https://hitl.example.com/?next=x"), "no query, fragment or credentials"),
        (("https://id.example.com", "http://id.example.com"), "web.oidc.issuer must use https://"),
        (("https://id.example.com", "https://slack.com"), "web.oidc.slack_team_id is required"),
        (("HITL_OIDC_SECRET", "the secret itself"), "names an environment variable"),
        (("client_id: hitl", "client_id: hitl\n    scopes: [email]"), "must include openid"),
        (("client_id: hitl", "client_id: hitl\n    scopes: [openid, 'a b']"), "single words"),
        (("U_SUPPORT2}", "''}"), "non-empty reviewer id"),
        (("  emails", "  idle_minutes: 0\n  emails"), "idle_minutes"),
        (("  emails", "  cookie: x\n  emails"), "cookie"),
    ],
)
def test_each_mistake_is_refused_naming_the_field(change: tuple[str, str], said: str) -> None:
    with pytest.raises(EngineError) as caught:
        parse_config(GOOD.replace(*change))
    assert caught.value.code == ErrorCode.POLICY_INVALID
    assert said in caught.value.message


def test_production_refuses_a_plain_http_public_url_even_on_this_machine() -> None:
    local = GOOD.replace("https://hitl.example.com/", "http://127.0.0.1:8080")
    assert parse_config(local).web is not None  # outside production: a local trial over plain HTTP
    with pytest.raises(EngineError) as caught:
        parse_config(local + "production: true\n")
    assert "web.public_url must be https:// under production: true" in caught.value.message
