"""Tier ``self`` on the decision page (issue 68), through a real `hitl serve` and a real sign-in: the person an agent
token's ``acts_for`` names finds the call in their inbox and confirms it under their own identity; a reviewer of the
tool's role finds it in neither inbox nor form, and a form posted anyway is refused and audited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.api import token_hash
from hitl.engine.domain.models import Status, Tier
from tests.web.conftest import Inbox, browser, serving, sign_in
from tests.web.test_page_decisions import approval, form_of, page_of, post

PERSON = "U_FIN3"
"""The person the assistant acts for: a finance reviewer, no member of the tool's role (support)."""
AGENT_TOKEN = "tok-web-assistant"


def _edit(text: str) -> str:
    """``send_as_me`` at tier self for the support role, and an agent token acting for :data:`PERSON`."""
    tool = "    send_as_me: {tier: self, role: support}\n"
    token = f"name: assistant, sha256: {token_hash(AGENT_TOKEN)}, reviewer: 'agent:assistant'"
    api = f"api:\n  tokens:\n    - {{{token}, scopes: [propose, read], acts_for: {PERSON}}}\n"
    return text.replace("  tools:\n", "  tools:\n" + tool, 1) + api


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[Inbox]:
    async with serving(tmp_path, edit=_edit) as running:
        yield running


async def test_the_person_confirms_on_the_page_and_a_reviewer_cannot(inbox: Inbox) -> None:
    async with browser() as agent:
        body = {"session": "s1", "tool": "send_as_me", "args": {"to": "bob@example.com"}, "idempotency_key": "k1"}
        headers = {"Authorization": f"Bearer {AGENT_TOKEN}"}
        async with agent.post(f"{inbox.url}/api/v1/proposals", json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            approval_id = (await r.json())["approval"]["id"]
    asked = await approval(inbox, approval_id)
    assert (asked.tier, asked.on_behalf_of) == (Tier.SELF, PERSON)

    async with browser() as reviewer, browser() as person:
        await sign_in(reviewer, inbox, "U_SUPPORT1")
        async with reviewer.get(f"{inbox.url}/inbox") as r:
            assert approval_id not in await r.text()  # not theirs: not in their inbox
        await sign_in(person, inbox, PERSON)
        async with person.get(f"{inbox.url}/inbox") as r:
            assert approval_id in await r.text()
        form = form_of(await page_of(person, inbox, approval_id), "approve")
        status, page = await post(reviewer, inbox, approval_id, form)  # the person's form, posted by another
        assert status == 403, page
        assert (await approval(inbox, approval_id)).status is Status.PENDING
        status, _ = await post(person, inbox, approval_id, form)
        assert status == 303
    done = await approval(inbox, approval_id)
    assert done.status is not Status.PENDING
    assert [(d.reviewer, d.kind, d.via) for d in done.decisions] == [(PERSON, "approve", "web")]
