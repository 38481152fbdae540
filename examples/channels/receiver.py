"""Microsoft Teams and PagerDuty from hitl's signed webhooks, with no code in hitl.

hitl serve POSTs each event here, signed. This receiver checks the signature and the
timestamp, then posts an Adaptive Card to a Teams incoming webhook for each new
approval, and triggers (or resolves) a PagerDuty alert for an escalation and for each
alert rule that fires. Both carry the decision page's link: a pointer, never a way
to decide. It answers 2xx only once the channel took the message, so hitl retries.

Environment: HITL_WEBHOOK_SECRET (as api.webhooks names it), TEAMS_WEBHOOK_URL,
PAGERDUTY_ROUTING_KEY (either channel may be left unset), PAGERDUTY_EVENTS_URL.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import re
import time
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

PAGERDUTY_EVENTS = "https://events.pagerduty.com/v2/enqueue"
TOLERANCE = 300  # seconds: an older request is refused (a replay)
SEEN = web.AppKey("seen", set)
HTTP = web.AppKey("http", ClientSession)


def signed_by_hitl(secret: str, headers: Any, body: bytes, now: float) -> bool:
    """The request is hitl's, and recent."""
    stamp = headers.get("X-Hitl-Timestamp", "")
    if not stamp.isdigit() or abs(now - int(stamp)) > TOLERANCE:
        return False
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
    sent = headers.get("X-Hitl-Signature", "")
    return hmac.compare_digest("v1=" + mac.hexdigest(), sent)


def inert(text: str) -> str:
    """Text from an approval, one line, no address a client would link."""
    flat = " ".join(str(text).split())[:300]
    return re.sub(r"(?i)([a-z][a-z0-9+.-]*):(?=//)", r"\1[:]", flat)


def page_of(public_url: str, approval_id: str) -> str:
    """The decision page: where a person signs in and decides."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", approval_id):
        raise ValueError(f"not an approval id: {approval_id!r}")
    return f"{public_url}/inbox/approvals/{approval_id}"


def adaptive_card(data: dict[str, Any], public_url: str) -> dict[str, Any]:
    """A Teams message holding one Adaptive Card for an approval event."""
    view, approval = data["view"], data["approval"]
    facts = [
        {"title": "Tool", "value": inert(approval["tool"])},
        {"title": "Tier", "value": inert(approval["tier"])},
        {"title": "Role", "value": inert(approval["required_role"] or "any")},
        {"title": "Asked by", "value": inert(view["requester"])},
    ]
    card = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.4",
        "body": [
            {
                "type": "TextBlock",
                "text": inert(view["heading"]),
                "wrap": True,
                "weight": "Bolder",
            },
            {"type": "FactSet", "facts": facts},
            {
                "type": "TextBlock",
                "wrap": True,
                "isSubtle": True,
                "text": f"Check that the link goes to {public_url} before you sign in.",
            },
        ],
        "actions": [
            {
                "type": "Action.OpenUrl",
                "title": "Open the decision page",
                "url": page_of(public_url, approval["id"]),
            },
        ],
    }
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "content": card},
        ],
    }


def pagerduty_event(
    kind: str, data: dict[str, Any], key: str, public_url: str
) -> dict[str, Any] | None:
    """A PagerDuty Events API v2 event for an escalation or an alert, else None."""
    if kind == "approval.created" and data["approval"]["tier"] == "escalate":
        approval = data["approval"]
        return {
            "routing_key": key,
            "event_action": "trigger",
            "dedup_key": f"hitl-{approval['id']}",
            "payload": {
                "summary": inert(data["view"]["heading"]),
                "source": "hitl",
                "severity": "warning",
            },
            "links": [
                {
                    "href": page_of(public_url, approval["id"]),
                    "text": "Open the decision page",
                }
            ],
        }
    if kind in ("alert.fired", "alert.resolved"):
        alert = data["alert"]
        return {
            "routing_key": key,
            "event_action": "trigger" if kind == "alert.fired" else "resolve",
            "dedup_key": f"hitl-alert-{alert['name']}-{alert['episode']}",
            "payload": {
                "summary": inert(
                    f"hitl alert {alert['name']}: {alert['reason'] or alert['figure']}"
                ),
                "source": "hitl",
                "severity": "error",
            },
        }
    return None


def receiver(public_url: str) -> web.Application:
    """The receiver's app: POST /hitl takes hitl's webhooks."""
    secret = os.environ["HITL_WEBHOOK_SECRET"]
    teams = os.environ.get("TEAMS_WEBHOOK_URL")
    pd_key = os.environ.get("PAGERDUTY_ROUTING_KEY")
    pd_url = os.environ.get("PAGERDUTY_EVENTS_URL", PAGERDUTY_EVENTS)

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        if not signed_by_hitl(secret, request.headers, body, time.time()):
            return web.Response(status=401, text="not signed by hitl")
        event_id = request.headers.get("X-Hitl-Event-Id", "")
        if event_id in request.app[SEEN]:
            return web.Response(text="seen")  # delivery is at least once
        event = await request.json()
        kind, data = event["type"], event["data"]
        posts: list[tuple[str, dict[str, Any]]] = []
        if teams and kind == "approval.created":
            posts.append((teams, adaptive_card(data, public_url)))
        paged = pagerduty_event(kind, data, pd_key, public_url) if pd_key else None
        if paged is not None:
            posts.append((pd_url, paged))
        for url, payload in posts:
            async with request.app[HTTP].post(url, json=payload) as r:
                if r.status >= 300:  # not taken: hitl retries with backoff
                    return web.Response(status=502, text=f"{url}: {r.status}")
        request.app[SEEN].add(event_id)
        return web.Response(text="ok")

    async def client(app: web.Application) -> Any:
        app[HTTP] = ClientSession(timeout=ClientTimeout(total=10))
        yield
        await app[HTTP].close()

    app = web.Application()
    app[SEEN] = set()
    app.cleanup_ctx.append(client)
    app.router.add_post("/hitl", hook)
    return app


if __name__ == "__main__":
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--port", type=int, default=8900)
    args.add_argument("--public-url", required=True, help="web.public_url")
    parsed = args.parse_args()
    app = receiver(parsed.public_url.rstrip("/"))
    web.run_app(app, host="127.0.0.1", port=parsed.port)
