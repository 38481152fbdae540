"""Conformance for failing backends: every method of every port raises :class:`StoreError` (never a client
library's own exception), so every surface can fail closed with one ``except``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Status
from hitl.engine.domain.records import AuditEntry, MessageRef
from hitl.engine.domain.retention import Retention
from hitl.engine.errors import StoreError
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.conformance.trust import grant
from hitl.engine.testing.factories import make_approval

__all__ = ["FailureConformance"]


def _calls(store: Store, now: float) -> dict[str, Callable[[], Awaitable[Any]]]:
    a = make_approval(now=now)
    ref = MessageRef(channel="C1", ts="1.0")
    return {
        "migrate": lambda: store.migrate(),
        "approvals.create": lambda: store.approvals.create(a),
        "approvals.get": lambda: store.approvals.get(a.id),
        "approvals.list_pending": lambda: store.approvals.list_pending(roles=["support"]),
        "approvals.count_pending": lambda: store.approvals.count_pending(roles=["support"]),
        "approvals.list_recent": lambda: store.approvals.list_recent(status=Status.APPROVED),
        "approvals.decide": lambda: store.approvals.decide(cmd(a, "U_SUPPORT1"), now=now),
        "approvals.wait_changed": lambda: store.approvals.wait_changed(a.id, after_version=1, timeout=0.01),
        "approvals.expire_due": lambda: store.approvals.expire_due(now=now),
        "approvals.transition": lambda: store.approvals.transition(
            a.id, target=Status.CANCELLED, expected_version=None, actor="x", now=now
        ),
        "ledger.claim": lambda: store.ledger.claim("k", action_hash="h", holder="w", now=now, lease=1),
        "ledger.record_outcome": lambda: store.ledger.record_outcome(
            "k", holder="w", attempt=1, ok=True, result={}, now=now
        ),
        "ledger.renew": lambda: store.ledger.renew("k", holder="w", attempt=1, now=now, lease=1),
        "ledger.get": lambda: store.ledger.get("k"),
        "runs.save": lambda: store.runs.save("r", {"status": "paused"}, expected_version=0, now=now),
        "runs.load": lambda: store.runs.load("r"),
        "runs.paused": lambda: store.runs.paused(),
        "runs.own": lambda: store.runs.own("r", holder="w", now=now, lease=1),
        "runs.renew": lambda: store.runs.renew("r", holder="w", now=now, lease=1),
        "runs.release": lambda: store.runs.release("r", holder="w"),
        "runs.orphaned": lambda: store.runs.orphaned(now=now),
        "jobs.enqueue": lambda: store.jobs.enqueue("resume", {}, now=now),
        "jobs.claim": lambda: store.jobs.claim("w", kind="resume", limit=1, now=now, lease=1),
        "jobs.ack": lambda: store.jobs.ack("resume/1-0" if "Redis" in type(store).__name__ else "1"),
        "jobs.settle": lambda: store.jobs.settle("resume", approval_id="apr_x"),
        "trust.grant": lambda: store.trust.grant(grant("s", "refund", until=now + 1), now=now),
        "trust.active": lambda: store.trust.active("s", requester="agent:riley", now=now),
        "trust.all_active": lambda: store.trust.all_active(now=now),
        "trust.revoke": lambda: store.trust.revoke("s", "refund", by="U", now=now),
        "halts.halt": lambda: store.halts.halt(HaltOrder(scope="refund", by="U", at=now)),
        "halts.lift": lambda: store.halts.lift("refund", by="U", now=now),
        "halts.active": lambda: store.halts.active(),
        "alerts.load": lambda: store.alerts.load("stale"),
        "alerts.save": lambda: store.alerts.save("stale", {"status": "ok"}, expected_version=0, now=now),
        "windows.add": lambda: store.windows.add("k", amount=1, now=now, window=60, event_id="e"),
        "windows.stats": lambda: store.windows.stats("k", now=now, window=60),
        "windows.forget": lambda: store.windows.forget("k", event_id="e"),
        "approvals.wait_created": lambda: store.approvals.wait_created(timeout=0.01),
        "audit.append": lambda: store.audit.append(AuditEntry(at=now, actor="x", event="note")),
        "audit.entries": lambda: store.audit.entries(),
        "audit.verify": lambda: store.audit.verify(),
        "audit.take_head": lambda: store.audit.take_head(),
        "purger.purge": lambda: store.purger.purge(Retention(), now=now),
        "purger.due": lambda: store.purger.due(Retention(), now=now),
        "messages.set": lambda: store.messages.set(a.id, ref),
        "messages.get": lambda: store.messages.get(a.id),
        "messages.card": lambda: store.messages.card(a.id),
        "messages.approval_for": lambda: store.messages.approval_for(ref),
        "messages.shown_on": lambda: store.messages.shown_on(ref),
        "ping": lambda: store.ping(),
    }


class FailureConformance:
    """Provide a ``dead_store`` fixture: the backend, pointed at something that does not answer."""

    async def test_a_dead_backend_raises_store_error_from_every_method(
        self, dead_store: Store, clock: FakeClock
    ) -> None:
        calls = _calls(dead_store, clock.now())
        leaked: dict[str, str] = {}
        for name, call in calls.items():
            with pytest.raises(Exception) as err:
                await call()
            if not isinstance(err.value, StoreError):
                leaked[name] = f"{type(err.value).__module__}.{type(err.value).__name__}: {err.value}"
        assert leaked == {}
        assert len(calls) == 50  # every method of every port, plus ping and migrate: a new method needs a line here
