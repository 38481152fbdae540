"""The whole 2026-07-28 path with real parts: the SDK's client → `hitl mcp` (a process) sends its user to the
decision page of `hitl serve` (a process, with the web inbox and the Slack stand-in), where a reviewer signs in at the
real OpenID Connect provider and approves; the client's retry then runs the call on the real upstream, once."""

from __future__ import annotations

import asyncio
import re
import secrets
import sys
from pathlib import Path
from urllib.parse import urlsplit

from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Status
from hitl.engine.storage import open_store
from tests.mcp.conftest import ROOT, UPSTREAM, text_of
from tests.mcp.test_round_trips import Elicited
from tests.waiting import eventually
from tests.web.conftest import browser, serving, sign_in


async def test_a_2026_client_is_sent_to_the_page_where_a_signed_in_reviewer_decides(tmp_path: Path) -> None:
    ledger, receipts = tmp_path / "ledger.db", tmp_path / "receipts.json"
    gateway = (
        "mcp:\n  session: desktop-1\n  wait: 20s\n  servers:\n    shop:\n"
        f"      command: [{sys.executable}, {UPSTREAM}]\n"
        f"      env: {{HITL_TEST_LEDGER: {ledger}, HITL_TEST_RECEIPTS: {receipts}}}\n"
    )
    async with serving(tmp_path, edit=lambda text: text + gateway) as inbox:
        env = {**inbox.env, "PYTHONPATH": str(ROOT), "HITL_MCP_STATE_KEY": secrets.token_hex(32)}
        server = StdioServerParameters(command=sys.executable, args=["-m", "hitl", "mcp"], env=env, cwd=str(tmp_path))
        user = Elicited()  # accepts whatever it is shown
        async with Client(server, mode="2026-07-28", elicitation_callback=user, cache=None) as client:
            call = asyncio.create_task(client.call_tool("delete_customer", {"customer_id": "C-7"}))
            [asked] = await eventually(lambda: user.asked or None, what="the client's user to be sent to the page")
            assert isinstance(asked, types.ElicitRequestURLParams)
            assert urlsplit(asked.url).netloc == urlsplit(inbox.url).netloc  # the host the user must be shown
            path = urlsplit(asked.url).path
            approval_id = path.rsplit("/", 1)[-1]
            store = open_store(inbox.env["HITL_STORE"])
            try:
                approval = await store.approvals.get(approval_id)
                assert approval.status is Status.PENDING  # the client's "accept" decided nothing
                async with browser() as http:
                    assert await sign_in(http, inbox, "U_SUPPORT1", path=path) == path
                    async with http.get(f"{inbox.url}{path}") as r:
                        csrf = re.search(r'name="csrf" value="([^"]+)"', await r.text())
                    assert r.status == 200 and csrf is not None
                    view = load_config(tmp_path / "hitl.yaml").present(approval)
                    form = {"csrf": csrf[1], "decision": "approve", "expected_version": str(approval.version)}
                    form |= {"action_hash": view.action_hash, "view_digest": view.digest()}
                    async with http.post(f"{inbox.url}{path}/decisions", data=form, allow_redirects=False) as r:
                        assert r.status in (200, 303), await r.text()
                result = await asyncio.wait_for(call, 60)
                final = await store.approvals.get(approval_id)
            finally:
                await store.close()
    assert text_of(result) == "deleted C-7" and not result.is_error
    assert final.status is Status.EXECUTED
    assert [(d.reviewer, d.via) for d in final.decisions] == [("U_SUPPORT1", "web")]
