"""Signing in to the web inbox at a real OpenID Connect provider, through a real `hitl serve`, and the attacks on
it: a forged state, a replayed code, an open-redirect return path, a session cookie from before sign-in, a cross-site
POST, sign-out."""

from __future__ import annotations

from tests.web.conftest import Inbox, browser, sign_in


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
