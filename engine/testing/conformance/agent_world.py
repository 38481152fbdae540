"""The world an adapter's agent runs in for the adapter conformance suite (:mod:`.adapters`): the policy it is
tested under, real tools that write every execution to a SQLite ledger file, scripted tool calls, a store that can
stop answering, and the harness protocol an adapter's test implements to drive its framework in it (and what a
harness uses to script and stop its agent). It imports no pytest, unlike the suite."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from hitl.engine.agents.gate import ToolGate, current_receipt
from hitl.engine.clocks import FakeClock
from hitl.engine.config.hitl_yaml import HitlConfig, parse_config
from hitl.engine.errors import StoreError
from hitl.engine.ports import Store
from hitl.engine.receipts.ports import ReceiptSigner
from hitl.engine.service import ApprovalService

__all__ = [
    "ADAPTER_CONFIG",
    "AgentHarness",
    "AgentRun",
    "AgentWorld",
    "BreakableStore",
    "Ledger",
    "ScriptedCall",
    "Transcript",
    "refund",
    "settle",
]

ADAPTER_CONFIG = """
requester: agent:conformance
roles:
  support: [U_S1, U_S2]
  finance: [U_F1, U_F2, U_F3]
policy:
  allowed_tools: [look_up_order]
  denied_tools: [wipe_database]
  trust_ttl: 1h
  tools:
    refund: {tier: approve, role: support, trustable: true, timeout: 10m}
  rules:
    - name: large_refund
      tools: [refund]
      when: "args.amount > 500"
      tier: escalate
      role: finance
      quorum: 2
      reason: "refund over 500 needs two finance approvers"
    - name: look_up_burst
      tools: [look_up_order]
      velocity: {subject: args.order_id, max: 3, window: 1h}
      tier: approve
      role: support
"""
"""The policy every adapter is tested under: an allowed, a denied and a gated tool, a trust grant, a quorum, and a
velocity limit on the allowed tool (per order: every other case looks an order up once at most)."""


class Ledger:
    """Real tools with typed signatures (frameworks derive their schemas from them) that write every execution to a
    SQLite file, so "ran exactly once with exactly these arguments" is read back from disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS effects (tool TEXT, order_id TEXT, amount REAL, receipt TEXT)")

    def _write(self, tool: str, order_id: str, amount: float | None) -> None:
        # What `hitl.current_receipt()` says inside the tool: the receipt a protected system would be given.
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO effects VALUES (?, ?, ?, ?)", (tool, order_id, amount, current_receipt()))

    def receipts(self, tool: str) -> list[str | None]:
        """The receipt each execution of ``tool`` read while it ran, in order."""
        with sqlite3.connect(self.path) as db:
            return [r for (r,) in db.execute("SELECT receipt FROM effects WHERE tool = ? ORDER BY rowid", (tool,))]

    def rows(self, tool: str | None = None) -> list[tuple[str, str, float | None]]:
        with sqlite3.connect(self.path) as db:
            rows = db.execute("SELECT tool, order_id, amount FROM effects ORDER BY rowid").fetchall()
        return [(t, o, a) for t, o, a in rows if tool is None or t == tool]

    def refund(self, order_id: str, amount: float) -> str:
        """Refund an order."""
        self._write("refund", order_id, float(amount))
        return f"refunded {float(amount):g} on order {order_id}"

    def look_up_order(self, order_id: str) -> str:
        """Look up an order."""
        self._write("look_up_order", order_id, None)
        return f"order {order_id}: shipped"

    def wipe_database(self, confirm: bool) -> str:
        """Delete every record."""
        self._write("wipe_database", "*", None)
        return "wiped"

    def tools(self) -> list[Callable[..., str]]:
        return [self.refund, self.look_up_order, self.wipe_database]


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call the scripted model makes."""

    call_id: str
    tool: str
    args: dict[str, Any]


@dataclass
class AgentRun:
    """A harness's handle on one agent run (what it holds is its own business)."""

    session: str
    calls: list[ScriptedCall]
    store: Store
    state: dict[str, Any] = field(default_factory=dict)


class _BrokenPort:
    """One store port that fails like a backend that stopped answering, once its store is broken."""

    def __init__(self, inner: Any, owner: BreakableStore) -> None:
        self._inner = inner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self._owner.broken:
                raise StoreError(f"store unavailable ({name})")
            return await attr(*args, **kwargs)

        return call


class BreakableStore:
    """A real store whose every method raises :class:`StoreError` after :meth:`break_` (the backend went away)."""

    PORTS = (
        "approvals",
        "ledger",
        "runs",
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
    )

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.broken = False
        for port in self.PORTS:
            setattr(self, port, _BrokenPort(getattr(inner, port), self))

    def break_(self) -> None:
        self.broken = True

    async def ping(self) -> None:
        if self.broken:
            raise StoreError("store unavailable (ping)")
        await self.inner.ping()

    async def migrate(self) -> list[int]:
        await self.ping()
        return await self.inner.migrate()

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class AgentWorld:
    """What a harness builds its agent from: the backend, the clock, the ledger and the policy."""

    open_store: Callable[[], Store]
    """A new connection to the suite's backend (a new process opens its own)."""
    clock: FakeClock
    ledger: Ledger
    config: HitlConfig = field(default_factory=lambda: parse_config(ADAPTER_CONFIG))
    signer: ReceiptSigner | None = None
    """Signs receipts (``receipts:`` in ``config``) as ``hitl serve`` would; None: none are signed here."""
    opened: list[Store] = field(default_factory=list)
    cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Called when the test ends (a harness closes what its agent processes opened)."""
    _gates: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def store(self) -> Store:
        made = self.open_store()
        self.opened.append(made)
        return cast(Store, BreakableStore(made))

    def service(self, store: Store) -> ApprovalService:
        return ApprovalService.from_config(self.config, store=store, clock=self.clock, signer=self.signer, environ={})

    def gate(self, store: Store, *, wait: float | None = None) -> ToolGate:
        # A name of its own, as each agent process has: two processes never share a claim's or a run's lease.
        gate = ToolGate(self.service(store), worker_id=f"conformance-agent-{next(self._gates)}")
        if wait is not None:
            gate.wait_default = wait
        return gate


@dataclass(frozen=True)
class Transcript:
    """What the model saw: each call's tool result text, by call id."""

    results: dict[str, str]


class AgentHarness(Protocol):
    """What an adapter's test provides to the conformance suite: its framework driven by a scripted model."""

    framework: str
    modifies: bool
    """Whether the framework runs a reviewer's edited arguments; if not, its approvals offer no Modify."""

    async def start(self, calls: list[ScriptedCall], *, session: str) -> AgentRun:
        """Run the agent until it waits for a person, or finishes."""
        ...

    async def finish(self, run: AgentRun) -> Transcript:
        """Let the agent finish after the decisions were made (await the inline wait, or resume)."""
        ...

    async def finish_shared(self, run: AgentRun) -> Transcript | None:
        """:meth:`finish` for one of several processes on the same session: None when another process already
        continued the run, so nothing waits here any more."""
        ...

    async def crash(self, run: AgentRun) -> None:
        """The agent process dies where it is (tasks cancelled, objects dropped; nothing is cleaned up)."""
        ...

    async def restart(self, run: AgentRun) -> AgentRun:
        """A new process takes over the same session: new agent objects and a new store connection."""
        ...


def refund(call_id: str, order_id: str, amount: float) -> ScriptedCall:
    """A scripted call of the suite's gated ``refund`` tool."""
    return ScriptedCall(call_id, "refund", {"order_id": order_id, "amount": amount})


async def settle(task: Awaitable[Any]) -> None:
    """Await a cancelled task, ignoring its cancellation."""
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
