"""The docs' recipe for Teams and PagerDuty (``examples/channels/receiver.py``): hitl's own webhook delivery signs and
POSTs the events to the example receiver, which posts an Adaptive Card to a Teams stand-in for a new approval and a
PagerDuty Events v2 trigger for an escalation, each linking the decision page and nothing else; a request hitl did
not sign is refused, and a channel that refuses makes hitl retry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from examples.channels.receiver import receiver
from hitl.api.webhooks import WebhookDelivery
from hitl.engine.config.api import EventKind, WebhookSpec
from hitl.engine.domain.models import Tier
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.subscribers.events import Outbox
from hitl.testing import FakeClock, make_approval
from tests.ports import free_port

PUBLIC = "https://hitl.example.com"


class Channel:
    """A stand-in for Teams' incoming webhook or PagerDuty's Events API: it keeps what it is sent, and answers
    ``status``."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        self.status = 202

    async def take(self, request: web.Request) -> web.Response:
        self.got.append(await request.json())
        return web.Response(status=self.status)


async def serve(app: web.Application) -> tuple[str, web.AppRunner]:
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return f"http://127.0.0.1:{port}", runner


@pytest.fixture
async def channels(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, Channel, Channel]]:
    teams, pagerduty = Channel(), Channel()
    stand_in = web.Application()
    stand_in.router.add_post("/teams", teams.take)
    stand_in.router.add_post("/pagerduty", pagerduty.take)
    base, stand_in_runner = await serve(stand_in)
    monkeypatch.setenv("HITL_WEBHOOK_SECRET", "channel-secret")
    monkeypatch.setenv("TEAMS_WEBHOOK_URL", f"{base}/teams")
    monkeypatch.setenv("PAGERDUTY_ROUTING_KEY", "pd-routing-key")
    monkeypatch.setenv("PAGERDUTY_EVENTS_URL", f"{base}/pagerduty")
    url, receiver_runner = await serve(receiver(PUBLIC))
    yield f"{url}/hitl", teams, pagerduty
    await receiver_runner.cleanup()
    await stand_in_runner.cleanup()


async def test_hitls_webhooks_reach_teams_and_pagerduty_through_the_example(
    tmp_path: Path, channels: tuple[str, Channel, Channel]
) -> None:
    url, teams, pagerduty = channels
    clock = FakeClock(time.time())  # the receiver refuses a timestamp far from its own clock (a replay)
    store = SqliteStore(tmp_path / "hitl.db")
    hook = WebhookSpec(url=url, secret_env="HITL_WEBHOOK_SECRET", events=[EventKind.APPROVAL_CREATED])
    delivery = WebhookDelivery(store, clock, consumer="test", outbox=Outbox(store, clock, [hook]))
    try:
        said = "Refund 49 (see [here](https://evil.example/x))"  # a summary carrying a link from the arguments
        escalated = make_approval(now=clock.now(), tier=Tier.ESCALATE).model_copy(update={"summary": said})
        a, _ = await store.approvals.create(escalated)
        await delivery.sweep()
        [message] = teams.got
        card = message["attachments"][0]
        assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
        assert card["content"]["type"] == "AdaptiveCard" and card["content"]["version"] == "1.4"
        assert card["content"]["actions"] == [
            {"type": "Action.OpenUrl", "title": "Open the decision page", "url": f"{PUBLIC}/inbox/approvals/{a.id}"}
        ]
        assert card["content"]["body"][0]["text"] == "Approval needed: Refund 49 (see [here](https[:]//evil.example/x))"
        facts = {f["title"]: f["value"] for f in card["content"]["body"][1]["facts"]}
        assert facts == {"Tool": "refund", "Tier": "escalate", "Role": "support", "Asked by": "agent:riley"}
        [paged] = pagerduty.got
        assert paged["routing_key"] == "pd-routing-key" and paged["event_action"] == "trigger"
        assert paged["dedup_key"] == f"hitl-{a.id}" and paged["links"][0]["href"] == f"{PUBLIC}/inbox/approvals/{a.id}"

        # A channel that refuses: the receiver answers 502, and hitl's delivery tries again later.
        teams.status = 500
        b, _ = await store.approvals.create(make_approval(now=clock.now(), key="b"))
        await delivery.sweep()
        assert len(teams.got) == 2 and len(pagerduty.got) == 1  # an approve tier pages no one
        teams.status = 202
        clock.advance(61)
        await delivery.sweep()
        assert len(teams.got) == 3 and teams.got[-1]["attachments"][0]["content"]["actions"][0]["url"].endswith(b.id)
        await delivery.sweep()
        assert len(teams.got) == 3  # delivered once it was taken
    finally:
        await delivery.close()
        await store.close()


async def test_a_request_hitl_did_not_sign_is_refused(channels: tuple[str, Channel, Channel]) -> None:
    url, teams, _ = channels
    body = b'{"type": "approval.created", "data": {}}'
    async with aiohttp.ClientSession() as http:
        async with http.post(url, data=body, headers={"X-Hitl-Timestamp": "1", "X-Hitl-Signature": "v1=00"}) as r:
            assert r.status == 401
    assert teams.got == []
