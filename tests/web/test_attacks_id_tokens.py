"""ID tokens signed with the real provider's own key (oidc-provider's development keystore, which its JWKS
publishes) and claims no honest provider sends, put to the web inbox's verifier against that provider's discovery
and JWKS: a claim that must be one string given as a list, and audiences beyond our client id. Each is refused."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from hitl.web.oidc import OidcClient, SignInError
from tests.processes import stop_process
from tests.web.conftest import CLIENT_SECRET, PROVIDER, Provider, provider_ready, start_provider
from tests.web.test_id_tokens import CALLBACK, spec

KID = "keystore-CHANGE-ME"
"""The key id of oidc-provider's development keystore (the provider in tests/web/oidc is given no keys)."""


@pytest.fixture
async def issuer(tmp_path: Path) -> AsyncIterator[Provider]:
    p = start_provider(tmp_path, [{"client_id": "hitl", "client_secret": CLIENT_SECRET, "redirect_uris": [CALLBACK]}])
    try:
        await provider_ready(p)
        yield p
    finally:
        stop_process(p.proc, grace=5)


def provider_key() -> RSAKey:
    """The provider's signing key, read from the installed oidc-provider's development keystore."""
    text = (PROVIDER / "node_modules/oidc-provider/lib/consts/dev_keystore.js").read_text()
    first = text.split("{", 2)[2].split("}", 1)[0]  # the first key of `export default { keys: [ {...}`
    return RSAKey.import_key(dict(re.findall(r"(\w+): '([^']*)'", first)))


async def verdicts(p: Provider, changes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each change's verdict on a token otherwise genuine: "accepted", or the refusal's code."""
    key, now = provider_key(), int(time.time())
    base = {"iss": p.issuer, "sub": "U_SUPPORT1", "aud": "hitl", "exp": now + 600, "iat": now, "nonce": "n-1"}
    client = OidcClient(spec(p.issuer), CLIENT_SECRET, now=lambda: float(now))
    found = {}
    try:
        for name, change in changes.items():
            token = jwt.encode({"alg": "RS256", "kid": KID}, {**base, **change}, key)
            try:
                await client.verify(token, nonce="n-1")
                found[name] = "accepted"
            except SignInError as exc:
                found[name] = exc.code
    finally:
        await client.close()
    return found


async def test_the_providers_key_signs_a_token_that_passes(issuer: Provider) -> None:
    assert await verdicts(issuer, {"genuine": {}, "one audience listed": {"aud": ["hitl"], "azp": "hitl"}}) == {
        "genuine": "accepted",
        "one audience listed": "accepted",
    }


async def test_a_nonce_or_issuer_given_as_a_list_is_refused(issuer: Provider) -> None:
    found = await verdicts(
        issuer,
        {
            "nonce list": {"nonce": ["n-1"]},
            "nonce among others": {"nonce": ["someone-elses", "n-1"]},
            "issuer list": {"iss": [issuer.issuer]},
            "issuer among others": {"iss": ["https://evil.example", issuer.issuer]},
        },
    )
    assert set(found.values()) == {"token_invalid"}, found


async def test_audiences_beyond_our_client_are_refused_whatever_azp_says(issuer: Provider) -> None:
    found = await verdicts(
        issuer,
        {
            "extra, no azp": {"aud": ["hitl", "evil"]},
            "extra, azp ours": {"aud": ["hitl", "evil"], "azp": "hitl"},
            "extra, azp theirs": {"aud": ["hitl", "evil"], "azp": "evil"},
            "ours, azp theirs": {"azp": "evil"},
        },
    )
    assert set(found.values()) == {"token_invalid"}, found
