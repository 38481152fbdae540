"""ID tokens the real provider issued, put to the web inbox's verifier: one for another client (audience), one
checked against another sign-in's nonce, one tampered with, one past its expiry. Each is refused; the genuine one
passes and names its reviewer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.config.web import WebSpec
from hitl.web.identity import reviewer_of
from hitl.web.oidc import OidcClient, SignInError, basic_auth, pkce_challenge, random_token
from tests.processes import stop_process
from tests.web.conftest import CLIENT_SECRET, TEAM, Provider, at_provider, provider_ready, query_of, start_provider

CALLBACK = "http://127.0.0.1:9/auth/callback"
"""Where the provider sends each client back (never visited: the tests take the code from the redirect)."""


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[Provider]:
    clients = [
        {"client_id": "hitl", "client_secret": CLIENT_SECRET, "redirect_uris": [CALLBACK]},
        {"client_id": "other-app", "client_secret": "other-secret", "redirect_uris": [CALLBACK]},
    ]
    p = start_provider(tmp_path, clients)
    try:
        await provider_ready(p)
        yield p
    finally:
        stop_process(p.proc, grace=5)


def spec(issuer: str, client_id: str = "hitl") -> WebSpec:
    web = parse_config(
        f"web:\n  public_url: http://127.0.0.1:9\n  oidc:\n    issuer: {issuer}\n    client_id: {client_id}\n"
        f"    slack_team_id: {TEAM}\n"
    ).web
    assert web is not None
    return web


async def id_token(p: Provider, who: str, *, client_id: str, secret: str, nonce: str) -> str:
    """A real ID token for ``who``, issued to ``client_id`` with ``nonce``, through the code flow."""
    verifier = random_token()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "scope": "openid email",
        "state": random_token(),
        "nonce": nonce,
        "code_challenge": pkce_challenge(verifier),
        "code_challenge_method": "S256",
    }
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        back = await at_provider(http, f"{p.issuer}/auth?{urlencode(query)}", who, until=CALLBACK)
        form = {"grant_type": "authorization_code", "code": query_of(back)["code"], "redirect_uri": CALLBACK}
        form["code_verifier"] = verifier
        async with http.post(
            f"{p.issuer}/token", data=form, headers={"Authorization": basic_auth(client_id, secret)}
        ) as r:
            assert r.status == 200, await r.text()
            token: str = (await r.json())["id_token"]
    return token


async def test_the_genuine_token_passes_and_names_the_slack_user(provider: Provider) -> None:
    client = OidcClient(spec(provider.issuer), CLIENT_SECRET, now=time.time)
    try:
        token = await id_token(provider, "U_SUPPORT1", client_id="hitl", secret=CLIENT_SECRET, nonce="n-1")
        claims = await client.verify(token, nonce="n-1")
        assert reviewer_of(client.web, claims) == "U_SUPPORT1"
        other_team = spec(provider.issuer).model_copy(
            update={"oidc": client.web.oidc.model_copy(update={"slack_team_id": "T0OTHER"})}
        )
        assert reviewer_of(other_team, claims) is None  # another workspace's people are nobody here
    finally:
        await client.close()


async def test_a_token_for_another_audience_is_refused(provider: Provider) -> None:
    client = OidcClient(spec(provider.issuer), CLIENT_SECRET, now=time.time)
    try:
        token = await id_token(provider, "U_SUPPORT1", client_id="other-app", secret="other-secret", nonce="n-1")
        with pytest.raises(SignInError) as caught:
            await client.verify(token, nonce="n-1")
        assert caught.value.code == "token_invalid" and "aud" in caught.value.message
    finally:
        await client.close()


async def test_a_token_with_another_sign_ins_nonce_is_refused(provider: Provider) -> None:
    client = OidcClient(spec(provider.issuer), CLIENT_SECRET, now=time.time)
    try:
        token = await id_token(provider, "U_SUPPORT1", client_id="hitl", secret=CLIENT_SECRET, nonce="theirs")
        with pytest.raises(SignInError) as caught:
            await client.verify(token, nonce="mine")
        assert caught.value.code == "token_invalid" and "nonce" in caught.value.message
    finally:
        await client.close()


async def test_a_tampered_or_expired_token_is_refused(provider: Provider) -> None:
    token = await id_token(provider, "U_SUPPORT1", client_id="hitl", secret=CLIENT_SECRET, nonce="n-1")
    head, body, sig = token.split(".")
    later = OidcClient(spec(provider.issuer), CLIENT_SECRET, now=lambda: time.time() + 24 * 3600)
    client = OidcClient(spec(provider.issuer), CLIENT_SECRET, now=time.time)
    try:
        with pytest.raises(SignInError) as caught:
            await client.verify(f"{head}.{body[:-4]}AAAA.{sig}", nonce="n-1")
        assert "signature" in caught.value.message
        with pytest.raises(SignInError) as caught:
            await client.verify(f"{head}.{body}.", nonce="n-1")  # no signature at all
        with pytest.raises(SignInError) as caught:
            await later.verify(token, nonce="n-1")
        assert "exp" in caught.value.message
    finally:
        await client.close()
        await later.close()


async def test_other_providers_map_a_subject_or_an_email_their_issuer_verified(provider: Provider) -> None:
    base = spec(provider.issuer)
    web = base.model_copy(
        update={
            "oidc": base.oidc.model_copy(update={"slack_team_id": None}),  # not Slack: its claims count for nothing
            "subjects": {"okta-ann": "U_SUPPORT1"},
            "emails": {"bob@example.test": "U_SUPPORT2", "unverifiedcid@example.test": "U_FIN1"},
        }
    )
    client = OidcClient(web, CLIENT_SECRET, now=time.time)
    try:

        async def who(login: str) -> str | None:
            token = await id_token(provider, login, client_id="hitl", secret=CLIENT_SECRET, nonce="n")
            return reviewer_of(web, await client.verify(token, nonce="n"))

        assert await who("okta-ann") == "U_SUPPORT1"  # by (iss, sub)
        assert await who("Bob") == "U_SUPPORT2"  # by the e-mail the issuer verified
        assert await who("unverifiedCid") is None  # email_verified false: the e-mail proves nothing
        assert await who("U_SUPPORT1") is None  # a Slack-looking claim from another issuer is not an identity
    finally:
        await client.close()
