"""Bad requests to the web inbox of a real `hitl serve`: each gets a clear 4xx, none a 5xx, and the server's log has
no traceback."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from tests.web.conftest import Inbox, browser, sign_in
from tests.web.test_decision_page import paused_refund


async def test_bad_requests_get_a_4xx_and_no_traceback(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 75)
    decide = f"{inbox.url}/inbox/approvals/{approval_id}/decisions"
    async with browser() as http:
        answers: list[tuple[str, int]] = []
        for path in (
            "/auth/callback",
            "/auth/callback?state=&code=",
            "/auth/callback?state=" + "x" * 5000 + "&code=y&iss=z",
            "/auth/callback?error=access_denied&state=abc",
            "/auth/login?next=" + "%00%ff" * 100,
            "/inbox/approvals/" + "a" * 3000,
            "/inbox/approvals/%E2%80%AEapr",
        ):
            async with http.get(f"{inbox.url}{path}", allow_redirects=False) as r:
                answers.append((path[:40], r.status))
        await sign_in(http, inbox, "U_SUPPORT1")
        async with http.get(f"{inbox.url}/inbox/approvals/{approval_id}") as r:
            found = re.search(r'name="csrf" value="([^"]+)"', await r.text())
        assert found is not None
        csrf = found[1]
        for name, form in (
            ("no decision", {"csrf": csrf}),
            ("unknown decision", {"csrf": csrf, "decision": "obey", "expected_version": "1"}),
            ("version not a number", {"csrf": csrf, "decision": "approve", "expected_version": "one"}),
            ("huge reason", {"csrf": csrf, "decision": "reject", "expected_version": "1", "reason": "r" * 30_000}),
            ("wrong hash", {"csrf": csrf, "decision": "approve", "expected_version": "1", "action_hash": "0" * 64}),
        ):
            async with http.post(decide, data=form, allow_redirects=False) as r:
                answers.append((name, r.status))
        async with http.post(
            decide, data=b'{"decision": "approve"}', headers={"Content-Type": "application/json"}
        ) as r:
            answers.append(("json body", r.status))
        async with http.post(decide, data=b"csrf=" + b"x" * 70_000) as r:
            answers.append(("oversize body", r.status))

        async def chunks() -> AsyncIterator[bytes]:
            yield f"csrf={csrf}&decision=approve".encode()

        async with http.post(decide, data=chunks()) as r:
            answers.append(("chunked body", r.status))
    signed_out, signed_in = answers[:7], answers[7:]
    assert all(status in (303, 400) for _, status in signed_out), signed_out  # refused, or sent to sign in
    assert all(400 <= status < 500 for _, status in signed_in), signed_in
    log = (inbox.cwd / "serve.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
