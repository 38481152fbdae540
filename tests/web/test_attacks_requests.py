"""Attacks on the web inbox of a real `hitl serve`, signed in at the real provider: form bodies a browser never
sends, a return path with a line break, and addresses no route answers. Each gets a clear 4xx (never a 5xx or a
traceback) and every answer carries the headers of a bank's page."""

from __future__ import annotations

import re

import aiohttp

from hitl.web.app import HEADERS, safe_return_path
from tests.web.conftest import Inbox, browser, sign_in, to_callback
from tests.web.test_decision_page import paused_refund


def no_traceback(inbox: Inbox) -> None:
    log = (inbox.cwd / "serve.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


async def csrf_of(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url) as r:
        found = re.search(r'name="csrf" value="([^"]+)"', await r.text())
    assert found is not None
    return found[1]


async def test_form_bodies_no_browser_sends_get_a_400_and_no_traceback(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 75)
    page = f"{inbox.url}/inbox/approvals/{approval_id}"
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        csrf = await csrf_of(http, page)
        form = f"csrf={csrf}&decision=reject&expected_version=1".encode()
        bodies = (
            ("bytes that are not UTF-8", form + b"&reason=\xff\xfe", "application/x-www-form-urlencoded"),
            ("an unknown charset", form, "application/x-www-form-urlencoded; charset=no-such-charset"),
            ("multipart without a boundary", form, "multipart/form-data"),
            ("multipart that is not", form, "multipart/form-data; boundary=xyz"),
        )
        answers = []
        for target in (f"{page}/decisions", f"{inbox.url}/auth/logout"):
            for name, body, kind in bodies:
                async with http.post(target, data=body, headers={"Content-Type": kind}) as r:
                    answers.append((target[-9:], name, r.status, r.headers.get("Content-Security-Policy")))
        async with http.get(page) as r:
            assert "Approve" in await r.text()  # still signed in, still pending: nothing was decided
    assert all(status == 400 and csp == HEADERS["Content-Security-Policy"] for *_, status, csp in answers), answers
    no_traceback(inbox)


async def test_a_return_path_ending_in_a_line_break_returns_to_the_inbox(inbox: Inbox) -> None:
    async with browser() as http:
        for sneaky in ("/inbox\n", "/inbox/approvals/apr_1\r\n"):
            callback = await to_callback(http, inbox, "U_SUPPORT1", path=sneaky)
            async with http.get(callback, allow_redirects=False) as r:
                assert (r.status, r.headers.get("Location")) == (303, "/inbox"), (sneaky, r.status, await r.text())
    no_traceback(inbox)


async def test_addresses_no_route_answers_still_carry_the_headers(inbox: Inbox) -> None:
    async with browser() as http:
        answers = []
        for method, path in (
            ("GET", "/inbox/nothing-here"),
            ("GET", "/inbox/approvals/apr_1/extra"),
            ("GET", "/inbox/static/other.css"),
            ("GET", "/auth/logout"),
            ("POST", "/inbox"),
            ("PUT", "/inbox/approvals/apr_1/decisions"),
            ("GET", "/auth/nothing-here"),
        ):
            async with http.request(method, f"{inbox.url}{path}", allow_redirects=False) as r:
                missing = [h for h, v in HEADERS.items() if r.headers.get(h) != v]
                answers.append((method, path, r.status, missing))
    assert all(400 <= status < 500 and not missing for *_, status, missing in answers), answers


def test_no_spelling_of_another_place_is_a_return_path() -> None:
    for bad in (
        "/inbox\n",
        "/inbox\r\n",
        "/inbox/approvals/apr_1\n",
        "/inbox\r\nSet-Cookie: x=1",
        "/inbox%0d%0a",
        "//evil.example/inbox",
        "/\\evil.example",
        "https:evil.example",
        "/%2F%2Fevil.example",
        "/inbox/approvals/apr_1/../../../evil",
        " /inbox",
        "/INBOX",
    ):
        assert safe_return_path(bad) == "/inbox", bad
    assert safe_return_path("/inbox/approvals/apr_1") == "/inbox/approvals/apr_1"


async def test_a_hitl_yaml_broken_while_serving_gets_a_503_page_and_no_traceback(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 75)
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        page = f"{inbox.url}/inbox/approvals/{approval_id}"
        csrf = await csrf_of(http, page)
        config = inbox.cwd / "hitl.yaml"
        config.write_text(config.read_text() + "\nroles: [not, a, mapping\n")  # an admin's edit, half saved
        answers = []
        for method, url, form in (
            ("GET", page, None),
            ("GET", f"{inbox.url}/inbox", None),
            ("POST", f"{page}/decisions", {"csrf": csrf, "decision": "reject", "expected_version": "1"}),
        ):
            async with http.request(method, url, data=form, allow_redirects=False) as r:
                answers.append((method, url[-20:], r.status, "try again" in await r.text()))
    assert all(status == 503 and said for *_, status, said in answers), answers
    no_traceback(inbox)


async def test_signing_in_again_ends_the_session_the_browser_held(inbox: Inbox) -> None:
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        before = {c.key: c.value for c in http.cookie_jar}["hitl_session"]
        await sign_in(http, inbox, "U_SUPPORT1")  # again (the provider remembers them): a new session
        after = {c.key: c.value for c in http.cookie_jar}["hitl_session"]
        async with http.get(f"{inbox.url}/inbox") as r:
            assert r.status == 200 and after != before
    async with aiohttp.ClientSession(cookies={"hitl_session": before}) as copied:  # a copy of the old cookie
        async with copied.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"].startswith("/auth/login")
