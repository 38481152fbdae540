"""The sandbox's "Sign in with Slack" over real HTTP, as hitl's own OpenID Connect client meets it: Slack's
discovery and claims, an ID token that hitl's client verifies against the stand-in's keys, and what a provider
refuses (an unregistered redirect URI, no person picked, a code used twice, a wrong PKCE verifier, a wrong secret)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from hitl.engine.config.web import WebSpec
from hitl.sandbox.server import Emulator, start_emulator
from hitl.sandbox.sign_in import ACTING_AS, SandboxSignIn
from hitl.sandbox.webapi import SlackState
from hitl.testing import FakeClock
from hitl.web.identity import reviewer_of
from hitl.web.oidc import OidcClient, SignInError, pkce_challenge, random_token

PUBLIC = "http://127.0.0.1:9"  # never reached: the test reads the redirect instead of following it
SECRET = "sandbox-test-secret"


@pytest.fixture
async def provider(clock: FakeClock) -> AsyncIterator[tuple[Emulator, WebSpec]]:
    state = SlackState()
    state.users["U_SUPPORT1"] = {"name": "support1", "real_name": "Support1", "tz": "UTC"}
    sign_in = SandboxSignIn(state, "hitl-sandbox", SECRET, f"{PUBLIC}/auth/callback", now=clock.now)
    emulator = await start_emulator(state, extra_routes=sign_in.routes())
    spec = WebSpec.model_validate(
        {
            "public_url": PUBLIC,
            "oidc": {"issuer": emulator.url, "client_id": "hitl-sandbox", "slack_team_id": state.team_id},
        }
    )
    yield emulator, spec
    await emulator.close()


async def code_for(http: aiohttp.ClientSession, url: str, who: str | None) -> dict[str, str]:
    """The query the provider sends the browser back with, signed in as ``who`` (the page's pick)."""
    cookies = {ACTING_AS: who} if who else {}
    async with http.get(url, cookies=cookies, allow_redirects=False) as r:
        assert r.status == 302, (r.status, await r.text())
        location = r.headers["Location"]
    assert location.startswith(f"{PUBLIC}/auth/callback?")
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


async def test_hitl_signs_in_as_the_picked_person_with_slacks_claims(
    provider: tuple[Emulator, WebSpec], clock: FakeClock
) -> None:
    emulator, spec = provider
    client = OidcClient(spec, SECRET, now=clock.now)
    verifier, nonce = random_token(), random_token()
    try:
        url = await client.authorize_url(state="s1", nonce=nonce, verifier=verifier)
        async with aiohttp.ClientSession() as http:
            back = await code_for(http, url, "U_SUPPORT1")
            assert back["state"] == "s1"
            token = await client.exchange(back["code"], verifier)
            claims = await client.verify(token, nonce=nonce)
            assert claims["https://slack.com/user_id"] == "U_SUPPORT1" and claims["iss"] == emulator.url
            assert reviewer_of(spec, claims) == "U_SUPPORT1"
            with pytest.raises(SignInError):  # a code is used once
                await client.exchange(back["code"], verifier)
            again = await code_for(
                http, await client.authorize_url(state="s2", nonce=nonce, verifier=verifier), "U_SUPPORT1"
            )
            with pytest.raises(SignInError):  # the PKCE verifier must match the challenge sent
                await client.exchange(again["code"], random_token())
    finally:
        await client.close()
    wrong = OidcClient(spec, "not-the-secret", now=clock.now)
    try:
        url = await wrong.authorize_url(state="s3", nonce=nonce, verifier=verifier)
        async with aiohttp.ClientSession() as http:
            back = await code_for(http, url, "U_SUPPORT1")
            with pytest.raises(SignInError):
                await wrong.exchange(back["code"], verifier)
    finally:
        await wrong.close()


async def test_no_pick_and_an_unregistered_redirect_are_refused_without_a_redirect(
    provider: tuple[Emulator, WebSpec],
) -> None:
    emulator, _ = provider
    challenge = pkce_challenge(random_token())
    query = {
        "response_type": "code",
        "client_id": "hitl-sandbox",
        "scope": "openid",
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    authorize = f"{emulator.url}/openid/connect/authorize"
    async with aiohttp.ClientSession() as http:
        params = {**query, "redirect_uri": "http://127.0.0.1:9/elsewhere"}
        async with http.get(authorize, params=params, cookies={ACTING_AS: "U_SUPPORT1"}, allow_redirects=False) as r:
            assert r.status == 400 and "not registered" in await r.text()
        params = {**query, "redirect_uri": f"{PUBLIC}/auth/callback"}
        async with http.get(authorize, params=params, cookies={ACTING_AS: "U_NOBODY"}, allow_redirects=False) as r:
            assert r.status == 400 and "Acting as" in await r.text()
