"""Receipts in Temporal: hitl's own execute activity, in a worker holding no key, claims the approved call through
``hitl serve`` (a token with the ``claim`` scope: the requester is each workflow run) and hands the receipt to the
effect; workflow code never sees it. With ``hitl serve`` out of reach, the activity runs nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError

from hitl import ApprovalService
from hitl.api.tokens import token_hash
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts import KeySet, verify
from tests.bot.conftest import Harness
from tests.ports import free_port
from tests.receipts.conftest import own_connection, receipts_served
from tests.temporal.conftest import CONFIG, Stand, stand_on, temporal_client

WORKER = "tok-temporal-worker"
RECEIPTS = f"""receipts:
  issuer: https://hitl.example.com
  key_file: receipt.pem
  tools:
    refund: {{audience: payments}}
api:
  tokens:
    - {{name: worker, sha256: {token_hash(WORKER)}, reviewer: "agent:temporal-worker", scopes: [claim]}}
"""


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Harness]:
    """``hitl serve`` signing receipts, on the store the worker uses."""
    async with receipts_served(tmp_path, CONFIG + RECEIPTS) as h:
        yield h


@pytest.fixture
async def worker_store(tmp_path: Path, served: Harness) -> AsyncIterator[SqliteStore]:
    async with own_connection(tmp_path) as store:
        yield store


async def _stand(temporal_server: str, store: SqliteStore, tmp_path: Path, api_url: str) -> Stand:
    service = ApprovalService.from_config(
        load_config(tmp_path / "hitl.yaml"),
        store=store,
        clock=SystemClock(),
        environ={"HITL_API_URL": api_url, "HITL_TOKEN": WORKER},
    )
    return stand_on(await temporal_client(temporal_server), store, service)


async def test_the_execute_activity_hands_the_effect_its_receipt(
    temporal_server: str, served: Harness, worker_store: SqliteStore, tmp_path: Path
) -> None:
    stand = await _stand(temporal_server, worker_store, tmp_path, served.bot_url)
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
        await stand.service.decide(DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        assert await stand.deliver() == 1
        result = await asyncio.wait_for(handle.result(), 30)
    assert result == "done: refunded 120 on order 78291"  # the workflow's own result: no receipt in it
    (receipt,) = stand.receipts
    assert receipt is not None
    async with served.http.get(f"{served.bot_url}/.well-known/jwks.json") as published:
        keys = KeySet(await published.json(content_type=None))
    claims = verify(receipt, tool="refund", args={"order_id": "78291", "amount": 120}, keys=keys, audience="payments")
    assert claims["sub"] == approval.id and claims["requester"] == approval.requester
    assert (await worker_store.approvals.get(approval.id)).status is Status.EXECUTED


async def test_without_hitl_serve_the_activity_runs_nothing(
    temporal_server: str, served: Harness, worker_store: SqliteStore, tmp_path: Path
) -> None:
    stand = await _stand(temporal_server, worker_store, tmp_path, f"http://127.0.0.1:{free_port()}")
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
        await stand.service.decide(DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        assert await stand.deliver() == 1

        with pytest.raises(WorkflowFailureError) as failed:  # every attempt of the activity was refused
            await asyncio.wait_for(handle.result(), 60)
    assert "receipt_unavailable" in repr(failed.value.cause.__cause__ or failed.value.cause)
    assert stand.refunds == [] and stand.receipts == []
    assert await worker_store.ledger.get(f"call:{approval.id}") is None  # nothing claimed
    assert (await worker_store.approvals.get(approval.id)).status is Status.APPROVED
