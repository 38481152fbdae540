"""The web inbox's cookies behind TLS (``public_url`` https, as deployed with a proxy in front): a real `hitl serve`
signing in at the real provider. Every cookie it sets or clears is ``__Host-``-shaped (Secure, Path=/, no Domain),
else a browser ignores the Set-Cookie that clears it and the cookie outlives sign-out."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

import aiohttp
import pytest

from hitl.sandbox.server import Emulator, start_emulator
from tests.bot.conftest import serve_env, spawn_serve, wait_healthy, workspace
from tests.ports import free_port
from tests.web.conftest import (
    CLIENT_SECRET,
    Provider,
    at_provider,
    provider_ready,
    start_provider,
    stop_served,
    web_config,
)


@dataclass
class Served:
    """`hitl serve` on plain HTTP at ``url``, reached by people at ``public`` (https)."""

    url: str
    public: str


@pytest.fixture
async def behind_tls(tmp_path: Path) -> AsyncIterator[Served]:
    port = free_port()
    public = f"https://127.0.0.1:{port}"  # TLS ends at a proxy in front; the tests talk to hitl serve itself
    clients = [{"client_id": "hitl", "client_secret": CLIENT_SECRET, "redirect_uris": [f"{public}/auth/callback"]}]
    provider: Provider = start_provider(tmp_path, clients)
    emulator: Emulator | None = None
    proc: subprocess.Popen[bytes] | None = None
    try:
        await provider_ready(provider)
        state = workspace()
        emulator = await start_emulator(state)
        config = web_config(tmp_path, public, provider.issuer)
        env = serve_env(
            state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=config, HITL_OIDC_SECRET=CLIENT_SECRET
        )
        proc = spawn_serve(env, tmp_path, port)
        await wait_healthy(port, proc)
        yield Served(f"http://127.0.0.1:{port}", public)
    finally:
        await stop_served(proc, emulator, provider)


def set_cookies(response: aiohttp.ClientResponse) -> dict[str, dict[str, str | bool]]:
    """Each Set-Cookie of ``response``: its name -> its value and attributes (lower-cased names)."""
    found: dict[str, dict[str, str | bool]] = {}
    for header in response.headers.getall("Set-Cookie", []):
        for name, morsel in SimpleCookie(header).items():
            found[name] = {"value": morsel.value, **{k: v for k, v in morsel.items() if v}}
    return found


def host_shaped(cookie: dict[str, str | bool]) -> bool:
    return cookie.get("secure") is True and cookie.get("path") == "/" and "domain" not in cookie


async def test_every_cookie_set_or_cleared_behind_tls_is_host_shaped(behind_tls: Served) -> None:
    jar = aiohttp.CookieJar(unsafe=True, treat_as_secure_origin=behind_tls.url)
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(f"{behind_tls.url}/auth/login", allow_redirects=False) as r:
            signin = set_cookies(r)
            url = r.headers["Location"]
        assert list(signin) == ["__Host-hitl_signin"] and host_shaped(signin["__Host-hitl_signin"]), signin
        callback = await at_provider(http, url, "U_SUPPORT1", until=f"{behind_tls.public}/auth/callback")
        async with http.get(callback.replace(behind_tls.public, behind_tls.url), allow_redirects=False) as r:
            assert r.status == 303, await r.text()
            signed_in = set_cookies(r)
        session = signed_in["__Host-hitl_session"]
        assert host_shaped(session) and session.get("httponly") is True and session.get("samesite") == "Lax"
        cleared = signed_in["__Host-hitl_signin"]  # the sign-in's cookie, spent
        assert cleared["value"] == "" and host_shaped(cleared), cleared
        async with http.get(f"{behind_tls.url}/inbox") as r:
            page = await r.text()
            assert r.status == 200 and "U_SUPPORT1" in page
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        async with http.post(f"{behind_tls.url}/auth/logout", data={"csrf": csrf}) as r:
            assert r.status == 200
            signed_out = set_cookies(r)
        cleared = signed_out["__Host-hitl_session"]
        assert cleared["value"] == "" and host_shaped(cleared), cleared
