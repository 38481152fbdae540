"""Sign-in's rate limit behind a TLS proxy, through a real `hitl serve`: ``X-Forwarded-For`` names the client only
when the peer is one of ``web.trusted_proxies`` (then each client has its own bucket, and what a client writes to
the left of the proxy's hop changes nothing); from any other peer the header is ignored, whatever it says (none
are trusted by default: tests/web/test_web_config.py)."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from hitl.engine.storage import open_store
from tests.web.conftest import Inbox, browser, serving


async def attempts(inbox: Inbox, http: aiohttp.ClientSession, forwarded: list[str]) -> list[int]:
    """One sign-in start per ``X-Forwarded-For`` value: the statuses."""
    statuses = []
    for value in forwarded:
        headers = {"X-Forwarded-For": value}
        async with http.get(f"{inbox.url}/auth/login", headers=headers, allow_redirects=False) as r:
            statuses.append(r.status)
    return statuses


async def limited_details(inbox: Inbox) -> list[str]:
    """What the audit says of each sign-in refused for its rate."""
    store = open_store(inbox.env["HITL_STORE"])
    try:
        return [e.detail for e in await store.audit.entries() if e.event == "sign_in" and e.outcome == "rate_limited"]
    finally:
        await store.close()


async def test_behind_a_trusted_proxy_each_client_has_its_own_bucket(tmp_path: Path) -> None:
    async with serving(tmp_path, edit=lambda text: text + "  trusted_proxies: [127.0.0.1/32]\n") as inbox:
        async with browser() as http:
            # One client over its rate; the client forges hops to the left of the one the proxy appended.
            flood = await attempts(inbox, http, [f"198.51.100.{n}, 203.0.113.7" for n in range(20)])
            assert flood[:10] == [303] * 10 and 429 in flood
            # Everyone else behind the same proxy still signs in.
            assert await attempts(inbox, http, ["203.0.113.8", "203.0.113.9, 127.0.0.1"]) == [303, 303]
        assert await limited_details(inbox) == [
            "web sign-in from 203.0.113.7 (through 127.0.0.1): too many sign-in attempts"
        ]


async def test_from_a_peer_that_is_not_a_trusted_proxy_the_forwarded_header_is_ignored(tmp_path: Path) -> None:
    async with serving(tmp_path, edit=lambda text: text + "  trusted_proxies: [10.0.0.0/8]\n") as inbox:
        async with browser() as http:
            # A client naming a new address each time is still one peer: its bucket runs out.
            flood = await attempts(inbox, http, [f"203.0.113.{n}" for n in range(20)])
        assert flood[:10] == [303] * 10 and 429 in flood
        assert await limited_details(inbox) == ["web sign-in from 127.0.0.1: too many sign-in attempts"]
