"""A store of your own: any hitl store, each call's time kept per port and method.

It wraps another store and forwards every call, so it keeps every guarantee the
wrapped store gives (one atomic step per decision, one claim per effect);
``tests/storage/test_store_of_your_own.py`` runs every conformance suite on it. It
imports nothing but ``hitl`` and ``hitl.stores``, as your store would. Use it where
a store is taken: ``ApprovalService(store=TracedStore(open_store(url)), ...)``.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections import defaultdict
from typing import Any

from hitl.stores import (
    AlertStates,
    ApprovalStore,
    AuditLog,
    CallHolds,
    DelegationStore,
    ExecutionLedger,
    HaltOrders,
    JobQueue,
    Journal,
    MessageMap,
    Purger,
    RateWindows,
    ReceiptLedger,
    RunStore,
    Store,
    Tallies,
    TrustStore,
)

__all__ = ["TracedStore"]

PORTS = (
    "approvals",
    "ledger",
    "runs",
    "journal",
    "jobs",
    "trust",
    "halts",
    "delegations",
    "receipts",
    "holds",
    "alerts",
    "windows",
    "audit",
    "messages",
    "tallies",
    "purger",
)


class TracedStore:
    """``inner``'s ports, each call timed into :attr:`timings`.

    ``timings["approvals.decide"]`` holds the seconds of each ``decide`` call.
    """

    approvals: ApprovalStore
    ledger: ExecutionLedger
    runs: RunStore
    journal: Journal
    jobs: JobQueue
    trust: TrustStore
    halts: HaltOrders
    delegations: DelegationStore
    receipts: ReceiptLedger
    holds: CallHolds
    alerts: AlertStates
    windows: RateWindows
    audit: AuditLog
    messages: MessageMap
    tallies: Tallies
    purger: Purger

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.timings: defaultdict[str, list[float]] = defaultdict(list)
        for port in PORTS:
            setattr(self, port, _Traced(getattr(inner, port), port, self.timings))

    async def ping(self) -> None:
        await self.inner.ping()

    async def migrate(self) -> list[int]:
        return await self.inner.migrate()

    async def close(self) -> None:
        await self.inner.close()


class _Traced:
    """One port: its coroutine methods timed, the rest as the wrapped port has it."""

    def __init__(
        self, port: Any, name: str, timings: defaultdict[str, list[float]]
    ) -> None:
        self._port, self._name, self._timings = port, name, timings

    def __getattr__(self, attr: str) -> Any:
        found = getattr(self._port, attr)
        if not inspect.iscoroutinefunction(found):
            return found
        key = f"{self._name}.{attr}"

        @functools.wraps(found)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await found(*args, **kwargs)
            finally:
                self._timings[key].append(time.perf_counter() - started)

        return timed
