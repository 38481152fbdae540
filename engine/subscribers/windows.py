"""Rolling windows (velocity and rolling-sum rules) count what ran or may still run: an approval that ended without
running (rejected, superseded by an edit, expired, cancelled) leaves them, and an approved edit counts its edited
arguments instead of the proposed ones."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from hitl.engine.domain.actions import window_events
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.policy import Policy
from hitl.engine.ports import Store
from hitl.engine.subscribers.facts import Cancelled, Decided, Expired, Fact, Service

__all__ = ["NEVER_RAN", "RollingWindows", "count_windows", "forget_windows"]

log = logging.getLogger(__name__)

NEVER_RAN = frozenset({Status.REJECTED, Status.SUPERSEDED, Status.EXPIRED, Status.CANCELLED})
"""Where an approval ends without its action running."""


class RollingWindows:
    """Keeps each approval's window events in step with what may still run."""

    observes = (Decided, Expired, Cancelled)

    async def observe(self, fact: Fact, service: Service) -> None:
        if not isinstance(fact, Decided | Expired | Cancelled):
            return
        a = fact.approval
        if isinstance(fact, Decided) and fact.kind is DecisionKind.MODIFY and a.status is Status.APPROVED:
            await forget_windows(service.store, window_events(a))
            await count_windows(
                service.store, service.policy, a.tool, a.execute_args, window_events(a), now=service.clock.now()
            )
        elif a.status in NEVER_RAN:
            await forget_windows(service.store, window_events(a))


async def count_windows(
    store: Store,
    policy: Policy,
    tool: str,
    args: Mapping[str, Any],
    events: list[tuple[str, str]] | list[list[str]],
    *,
    now: float,
) -> None:
    """Add ``events`` (window key, event id) for ``args`` to the windows the tool's rules keep."""
    ids = dict((str(k), str(e)) for k, e in events)
    for key, (window, amount) in policy.window_keys(tool, args).items():
        if key in ids:
            await store.windows.add(key, amount=amount, now=now, window=window, event_id=ids[key])


async def forget_windows(store: Store, events: Sequence[Sequence[str]]) -> None:
    """Take ``events`` (window key, event id) out of their windows. A failure leaves one counted: the rules stay
    stricter, never looser."""
    for key, event in events:
        try:
            await store.windows.forget(key, event_id=event)
        except Exception:
            log.exception("window event %s could not be forgotten; it stays counted", event)
