"""Webhook delivery: ``hitl serve`` POSTs the queued events (:mod:`hitl.engine.subscribers.events`) to their
subscribers.

Each request carries::

    X-Hitl-Event-Id: approval.decided:apv_...:v3      (stable: deduplicate on it)
    X-Hitl-Event: approval.decided
    X-Hitl-Timestamp: 1795000000                        (seconds; refuse old ones to stop replays)
    X-Hitl-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>" with the subscriber's secret>

A 2xx answer is delivery. Anything else (or no answer in 10 s) is retried with exponential backoff (30 s, 1 min,
2 min ... at most an hour apart) through the durable job queue, up to :data:`MAX_ATTEMPTS` times, after which the
give-up is written to the audit trail. Delivery is at least once: a receiver may see an event twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from typing import Any

import aiohttp

from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import NotFound
from hitl.engine.ports import Clock, Store
from hitl.engine.subscribers.events import EVENT_JOB, WEBHOOK_JOB, Outbox

__all__ = ["MAX_ATTEMPTS", "WebhookDelivery", "sign", "verify"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 12
TIMEOUT = 10.0
LEASE = 30.0
"""Seconds a claimed delivery stays with this process; a crashed deliverer's jobs are picked up after it."""


def backoff(attempt: int) -> float:
    """Seconds before delivery attempt ``attempt + 1`` (doubling, at most an hour)."""
    return float(min(LEASE * 2 ** (attempt - 1), 3600))


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature of a webhook delivery (``v1=`` HMAC-SHA256 of timestamp and body)."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(secret: str, headers: dict[str, str], body: bytes, *, now: float, tolerance: float = 300.0) -> bool:
    """What a receiver does (the documented snippet, kept runnable): the signature matches and is recent."""
    stamp = headers.get("X-Hitl-Timestamp", "")
    if not stamp.isdigit() or abs(now - int(stamp)) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, stamp, body), headers.get("X-Hitl-Signature", ""))


class WebhookDelivery:
    """A sweeper for ``hitl serve``'s background loop: claim due deliveries, POST them, ack or reschedule."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        consumer: str,
        outbox: Outbox | None = None,
        batch: int = 50,
        lease: float = LEASE,
    ) -> None:
        self.store = store
        self.clock = clock
        self.consumer = consumer
        self.outbox = outbox
        self.batch = batch
        self.lease = lease
        self._http: aiohttp.ClientSession | None = None
        self._cursor: str | None = None
        self._reconciled: dict[str, int] = {}
        """Approval id -> the version whose events were last reconciled (pending approvals of the last pass)."""
        self._passing: dict[str, int] = {}

    async def sweep(self) -> None:
        """Queue the events decisions wrote jobs for, catch up on events a crashed process never queued, then
        deliver what is due."""
        await self.decided()
        await self.catch_up()
        await self.deliver()

    async def decided(self) -> None:
        """Turn each decision's :data:`~hitl.engine.subscribers.events.EVENT_JOB` (written in its atomic step) into
        the events its approval now implies; an approval retention removed since has none left to tell."""
        jobs = await self.store.jobs.claim(
            self.consumer, kind=EVENT_JOB, limit=self.batch, now=self.clock.now(), lease=self.lease
        )
        for job in jobs:
            if self.outbox is not None:
                try:
                    approval = await self.store.approvals.get(str(job.payload.get("approval_id", "")))
                except NotFound:
                    approval = None
                if approval is not None:
                    await self.outbox.catch_up(approval)
            await self.store.jobs.ack(job.id)

    async def catch_up(self, *, pages: int = 5, page_size: int = 200) -> None:
        """Queue the events pending approvals imply and nobody queued (their creator died right after creating
        them, say): ``pages`` pages per sweep, resuming where the last sweep stopped, like the card sweep."""
        if self.outbox is None:
            return
        for _ in range(pages):
            page = await self.store.approvals.list_pending(limit=page_size, cursor=self._cursor)
            self._cursor = page.cursor
            for approval in page.items:
                # Each approval is reconciled once per version this process sees, not on every sweep: its events
                # change only when its version does.
                if self._reconciled.get(approval.id) != approval.version:
                    await self.outbox.catch_up(approval)
                self._passing[approval.id] = approval.version
            if page.cursor is None:
                # A whole pass is done: what it saw is all that is pending (decided approvals drop out).
                self._reconciled, self._passing = self._passing, {}
                return

    async def deliver(self) -> None:
        jobs = await self.store.jobs.claim(
            self.consumer, kind=WEBHOOK_JOB, limit=self.batch, now=self.clock.now(), lease=self.lease
        )
        for job in jobs:
            payload = job.payload
            if float(payload.get("not_before", 0)) > self.clock.now():
                continue  # not due: it comes back when the lease runs out
            ok, why = await self._post(payload)
            if not ok:
                await self._reschedule(payload, why)
            await self.store.jobs.ack(job.id)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def _post(self, payload: dict[str, Any]) -> tuple[bool, str]:
        secret = os.environ.get(str(payload.get("secret_env", "")), "")
        if not secret:
            return False, f"the signing secret ${payload.get('secret_env')} is not set in hitl serve's environment"
        event = payload["event"]
        body = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        stamp = str(int(self.clock.now()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "hitl-webhooks/1",
            "X-Hitl-Event-Id": str(event["id"]),
            "X-Hitl-Event": str(event["type"]),
            "X-Hitl-Timestamp": stamp,
            "X-Hitl-Signature": sign(secret, stamp, body),
        }
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        try:
            async with self._http.post(str(payload["url"]), data=body, headers=headers, allow_redirects=False) as r:
                await r.read()
                return 200 <= r.status < 300, f"HTTP {r.status}"
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return False, type(exc).__name__

    async def _reschedule(self, payload: dict[str, Any], why: str) -> None:
        attempt = int(payload.get("attempt", 1))
        event = payload["event"]
        now = self.clock.now()
        if attempt >= MAX_ATTEMPTS:
            log.warning("gave up delivering %s to %s after %d attempts: %s", event["id"], payload["url"], attempt, why)
            await self.store.audit.append(
                AuditEntry(
                    at=now,
                    actor=self.consumer,
                    event="webhook_failed",
                    outcome="gave_up",
                    detail=f"{event['id']} to {payload['url']}: {why} ({attempt} attempts)"[:500],
                )
            )
            return
        log.info(
            "delivery of %s to %s failed (%s); attempt %d in %.0f s",
            event["id"],
            payload["url"],
            why,
            attempt + 1,
            backoff(attempt),
        )
        # Queued again before the old job is acked: a crash in between delivers twice, never not at all.
        await self.store.jobs.enqueue(
            WEBHOOK_JOB, {**payload, "attempt": attempt + 1, "not_before": now + backoff(attempt)}, now=now
        )
