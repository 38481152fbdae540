"""``web:`` in hitl.yaml: the web inbox's address and OpenID Connect provider, each mistake refused with the
configuration's coded error naming the field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.errors import EngineError, ErrorCode
from tests.bot.conftest import ROOT
from tests.ports import free_port

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
        (("  emails", "  trusted_proxies: [10.0.0.0/33]\n  emails"), "web.trusted_proxies lists networks"),
        (("  emails", "  trusted_proxies: [proxy.internal]\n  emails"), "not 'proxy.internal'"),
    ],
)
def test_each_mistake_is_refused_naming_the_field(change: tuple[str, str], said: str) -> None:
    with pytest.raises(EngineError) as caught:
        parse_config(GOOD.replace(*change))
    assert caught.value.code == ErrorCode.POLICY_INVALID
    assert said in caught.value.message


def test_trusted_proxies_are_none_unless_listed() -> None:
    assert parse_config(GOOD).web.trusted_proxies == []  # type: ignore[union-attr]
    listed = parse_config(GOOD.replace("  emails", "  trusted_proxies: [10.0.0.0/8, '2001:db8::/32']\n  emails"))
    assert listed.web is not None and listed.web.trusted_proxies == ["10.0.0.0/8", "2001:db8::/32"]


def test_production_refuses_a_plain_http_public_url_even_on_this_machine() -> None:
    local = GOOD.replace("https://hitl.example.com/", "http://127.0.0.1:8080")
    assert parse_config(local).web is not None  # outside production: a local trial over plain HTTP
    with pytest.raises(EngineError) as caught:
        parse_config(local + "production: true\n")
    assert "web.public_url must be https:// under production: true" in caught.value.message


def _refused_at_start(tmp_path: Path, env_added: dict[str, str], said: str, *options: str) -> None:
    """`hitl serve OPTIONS` on the web inbox's hitl.yaml (``env_added`` to its environment) exits 1 at start,
    saying ``said``, with no traceback."""
    config = tmp_path / "hitl.yaml"
    config.write_text(GOOD.replace("https://hitl.example.com/", "http://127.0.0.1:9"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HITL_"))}
    env |= {"PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "s"}
    env |= {"HITL_CONFIG": str(config), **env_added}
    env |= {"SLACK_API_URL": "http://127.0.0.1:9/api/", "HITL_STORE": f"sqlite:///{tmp_path}/hitl.db"}
    out = subprocess.run(
        [sys.executable, "-m", "hitl", "serve", *options, "--port", str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert said in out.stderr
    assert "Traceback" not in out.stderr


def test_hitl_serve_refuses_to_start_without_the_client_secret(tmp_path: Path) -> None:
    _refused_at_start(tmp_path, {}, "web.oidc.client_secret_env names HITL_OIDC_SECRET, which is not set")


def test_hitl_serve_refuses_to_serve_the_web_inbox_from_several_workers(tmp_path: Path) -> None:
    """Sessions live in one process's memory: under --workers a signed-in reviewer would be asked to sign in again
    by whichever worker the kernel hands the next request to."""
    _refused_at_start(
        tmp_path,
        {"HITL_OIDC_SECRET": "s3cret"},
        "keeps sign-in sessions in one process: serve it without --workers",
        "--workers",
        "2",
    )
