"""Signing in to the web inbox at a real OpenID Connect provider, through a real `hitl serve`, and the attacks on
it: a forged state, a replayed code, an open-redirect return path, a session cookie from before sign-in, a cross-site
POST, sign-out."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from yarl import URL

from hitl.engine.storage import open_store
from tests.web.conftest import Inbox, browser, query_of, sign_in, to_callback


async def test_a_reviewer_signs_in_and_sees_the_inbox(inbox: Inbox) -> None:
    async with browser() as http:
        async with http.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/auth/login?next=/inbox"  # unauthenticated: sign in
        landed = await sign_in(http, inbox, "U_SUPPORT1")
        assert landed == "/inbox"
        async with http.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 200
            page = await r.text()
        assert "Signed in as <b>U_SUPPORT1</b>" in page


async def audit_outcomes(inbox: Inbox) -> list[str]:
    """The outcomes of the sign-ins `hitl serve` audited, oldest first."""
    store = open_store(inbox.env["HITL_STORE"])
    try:
        return [e.outcome for e in await store.audit.entries() if e.event == "sign_in"]
    finally:
        await store.close()


async def test_every_answer_carries_the_headers_and_the_cookie_is_httponly_and_lax(inbox: Inbox) -> None:
    async with browser() as http:
        callback = await to_callback(http, inbox, "U_SUPPORT1")
        async with http.get(callback, allow_redirects=False) as r:
            cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain http on 127.0.0.1 only: over https it is __Host- and Secure
        for path in ("/inbox", "/inbox/approvals/apr_NOPE", "/auth/login", "/inbox/static/inbox.css"):
            async with http.get(f"{inbox.url}{path}", allow_redirects=False) as r:
                csp = r.headers["Content-Security-Policy"]
                assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "script-src" not in csp
                assert r.headers["Cache-Control"] == "no-store"
                assert r.headers["Referrer-Policy"] == "no-referrer"
                assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert await audit_outcomes(inbox) == ["ok"]


async def test_a_forged_state_signs_nobody_in(inbox: Inbox) -> None:
    async with browser() as http:
        callback = await to_callback(http, inbox, "U_SUPPORT1")
        q = query_of(callback)
        forged = f"{inbox.url}/auth/callback?" + urlencode({**q, "state": "forged-" + q["state"][:20]})
        async with http.get(forged, allow_redirects=False) as r:
            assert r.status == 400
            assert "not started in this browser" in await r.text()
        async with http.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303  # still signed out
    async with browser() as other:  # the right state, from another browser (a login CSRF): refused as well
        await other.get(f"{inbox.url}/auth/login", allow_redirects=False)
        async with other.get(callback, allow_redirects=False) as r:
            assert r.status == 400
    assert await audit_outcomes(inbox) == ["state_mismatch", "state_mismatch"]


async def test_a_replayed_code_signs_nobody_in(inbox: Inbox) -> None:
    async with browser() as victim:
        callback = await to_callback(victim, inbox, "U_SUPPORT1")
        async with victim.get(callback, allow_redirects=False) as r:
            assert r.status == 303
        async with victim.get(callback, allow_redirects=False) as r:
            assert r.status == 400  # its state was used up
    async with browser() as thief:  # the stolen code with a state of the thief's own: the provider refuses it
        async with thief.get(f"{inbox.url}/auth/login", allow_redirects=False) as r:
            mine = query_of(r.headers["Location"])["state"]
        replay = f"{inbox.url}/auth/callback?" + urlencode({**query_of(callback), "state": mine})
        async with thief.get(replay, allow_redirects=False) as r:
            assert r.status == 400
            assert "refused the code" in await r.text()
        async with thief.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303
    assert await audit_outcomes(inbox) == ["ok", "state_mismatch", "code_refused"]


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example/inbox", "/\\evil.example", "/inbox/../auth/logout", "javascript:x"],
)
async def test_the_return_path_is_only_one_of_the_inboxs_own_pages(inbox: Inbox, target: str) -> None:
    async with browser() as http:
        assert await sign_in(http, inbox, "U_SUPPORT1", path=target) == "/inbox"
        assert await sign_in(http, inbox, "U_SUPPORT1", path="/inbox/approvals/apr_1") == "/inbox/approvals/apr_1"


async def test_a_session_cookie_set_before_sign_in_is_never_adopted(inbox: Inbox) -> None:
    planted = "attacker-chosen-session-id"
    async with browser() as http:
        http.cookie_jar.update_cookies({"hitl_session": planted}, URL(inbox.url))
        await sign_in(http, inbox, "U_SUPPORT1")
        now = {c.key: c.value for c in http.cookie_jar}["hitl_session"]
        assert now != planted
    async with browser() as attacker:
        attacker.cookie_jar.update_cookies({"hitl_session": planted}, URL(inbox.url))
        async with attacker.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303  # the planted id names no session


async def test_sign_out_is_a_post_with_the_csrf_token_from_this_site_and_revokes_the_session(inbox: Inbox) -> None:
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        async with http.get(f"{inbox.url}/inbox") as r:
            csrf = re.search(r'name="csrf" value="([^"]+)"', await r.text())
        assert csrf is not None
        sid = {c.key: c.value for c in http.cookie_jar}["hitl_session"]
        async with http.get(f"{inbox.url}/auth/logout") as r:
            assert r.status == 405
        async with http.post(f"{inbox.url}/auth/logout", data={"csrf": "wrong"}) as r:
            assert r.status == 403
        evil = {"Origin": "https://evil.example"}
        async with http.post(f"{inbox.url}/auth/logout", data={"csrf": csrf[1]}, headers=evil) as r:
            assert r.status == 403  # a cross-site POST, even one that knew the token
        async with http.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 200  # none of those signed anyone out
        async with http.post(f"{inbox.url}/auth/logout", data={"csrf": csrf[1]}, headers={"Origin": inbox.url}) as r:
            assert r.status == 200 and "signed out" in await r.text()
    async with browser() as copy:  # the cookie's value, kept by someone, is worth nothing now
        copy.cookie_jar.update_cookies({"hitl_session": sid}, URL(inbox.url))
        async with copy.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303


async def test_sign_in_attempts_are_rate_limited_per_address_and_audited(inbox: Inbox) -> None:
    async with browser() as http:
        statuses = []
        for _ in range(20):  # a burst of 10, then one every 2 s: 20 at once cannot all pass
            async with http.get(f"{inbox.url}/auth/login", allow_redirects=False) as r:
                statuses.append(r.status)
    assert statuses[:10] == [303] * 10 and 429 in statuses
    assert (await audit_outcomes(inbox)).count("rate_limited") == 1  # a flood does not fill the trail


async def test_a_code_said_to_come_from_another_issuer_is_refused(inbox: Inbox) -> None:
    """RFC 9207: the provider names itself with the code; an answer naming another issuer (a mix-up) is refused."""
    async with browser() as http:
        callback = await to_callback(http, inbox, "U_SUPPORT1")
        q = query_of(callback)
        assert q["iss"] == inbox.issuer
        mixed = f"{inbox.url}/auth/callback?" + urlencode({**q, "iss": "https://other-provider.example"})
        async with http.get(mixed, allow_redirects=False) as r:
            assert r.status == 400 and "another issuer" in await r.text()
        async with http.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303
    assert await audit_outcomes(inbox) == ["issuer_mismatch"]
