"""A receipt names the consequence of what runs: after a Modify, the one ``hitl serve`` computed (in a worker
process) for the edited arguments, by its RFC 8785 digest, as the approval the API answers with shows it; never the
one of the arguments the agent asked with."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.bot.conftest import Harness
from tests.receipts.conftest import AGENT, CONFIG, FIN1, api, receipts_served

DECLARED = '      timeout: 1h\n      consequence: "tests.consequence_tools:pay"\n'


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Harness]:
    """``hitl serve`` signing receipts, its ``pay`` tool declaring a consequence."""
    assert CONFIG.count("      timeout: 1h\n") == 1
    async with receipts_served(tmp_path, CONFIG.replace("      timeout: 1h\n", DECLARED)) as h:
        yield h


def _claims(receipt: str) -> dict[str, Any]:
    body = receipt.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


async def test_a_modified_payments_receipt_names_the_consequence_of_the_edited_arguments(served: Harness) -> None:
    proposal = {"session": "ses_pay", "tool": "pay", "args": {"to": "V-1", "amount": 120}, "idempotency_key": "m1"}
    pending = await api(served, "POST", "/proposals", AGENT, proposal)
    a = pending["approval"]
    assert a["consequence"]["summary"] == "Pays 120.00 to V-1"
    decision = {"decision": "modify", "expected_version": a["version"], "action_hash": a["action_hash"]}
    done = await api(served, "POST", f"/approvals/{a['id']}/decisions", FIN1, {**decision, "args": {"amount": 80}})
    assert done["status"] == "approved" and done["consequence"]["summary"] == "Pays 80.00 to V-1", done
    claimed = await api(
        served, "POST", f"/executions/{pending['execution_key']}/claim", AGENT, {"action_hash": done["execute_hash"]}
    )
    assert claimed["acquired"] and claimed["receipt"], claimed
    signed = _claims(str(claimed["receipt"]))
    assert signed["consequence_sha256"] == done["consequence"]["sha256"] != a["consequence"]["sha256"]
