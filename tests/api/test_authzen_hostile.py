"""Holes found by attacking the AuthZEN decision point through a real ``hitl serve``: an approval withdrawn before
its receipts were spent admits nothing more (hitl is the relying party a gateway asks), and a session or request id
that no store can keep is a 400, never a 5xx."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.clocks import FakeClock
from hitl.receipts.signing import new_key_pem
from tests.api.test_authzen import CONFIG, FIN1, TO_V1, ask, evaluation, held_call, refusal
from tests.bot.conftest import Harness, harness_on


@pytest.fixture(params=("sqlite", "redis", "postgres"))
async def hitl(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """``hitl serve`` on each store, signing receipts with ``tmp_path/receipt.pem``."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    async with harness_on(request, tmp_path, clock, CONFIG) as h:
        yield h


async def approved(h: Harness, request_id: str) -> str:
    """A held call (past the velocity of three), approved by U_FIN1: its approval's id."""
    approval_id, a = await held_call(h, request_id, fillers=f"fill-{request_id}-")
    decision = {"decision": "approve", "expected_version": a["version"], "action_hash": a["action_hash"]}
    assert (await ask(h, f"/api/v1/approvals/{approval_id}/decisions", decision, FIN1))[0] == 200
    return approval_id


WITHDRAWN_ANSWER = "withdrawn"


def no_longer(approval_id: str) -> dict[str, Any]:
    """The answer for a call whose approval was withdrawn."""
    return {"decision": False, "context": {"reason": WITHDRAWN_ANSWER, "approval_id": approval_id}}


async def withdraw(h: Harness, approval_id: str) -> None:
    status, done = await ask(h, f"/api/v1/approvals/{approval_id}/withdrawal", {"reason": "wrong payee"}, FIN1)
    assert status == 200, done


async def test_an_approval_withdrawn_before_its_hand_over_admits_nothing(hitl: Harness) -> None:
    approval_id = await approved(hitl, "r-w1")
    await withdraw(hitl, approval_id)
    for _ in range(2):
        status, no = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-w1"))
        assert status == 200 and no == no_longer(approval_id)
    _, a = await ask(hitl, f"/api/v1/approvals/{approval_id}", None, FIN1, method="GET")
    assert a["status"] == "approved"  # never handed over


async def test_a_hand_over_withdrawn_before_its_receipt_was_spent_is_no_longer_repeated(hitl: Harness) -> None:
    approval_id = await approved(hitl, "r-w2")
    status, yes = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-w2"))
    assert status == 200 and yes["decision"] is True
    await withdraw(hitl, approval_id)
    status, no = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-w2"))
    assert status == 200 and no == no_longer(approval_id)


CHECKED = CONFIG.replace(
    "transfer: {tier: auto, timeout: 10m}",
    "transfer: {tier: auto, timeout: 10m, consequence: 'tests.consequence_tools:withdrawing', consequence_check: true,"
    " consequence_limits: {env: [WITHDRAW_ORDER]}}",
)
"""The gateway's transfers with their consequence checked again at each hand-over, by a consequence that withdraws
the approval ``$WITHDRAW_ORDER`` names (:func:`tests.consequence_tools.withdrawing`)."""


@pytest.fixture(params=("sqlite", "redis"))
async def checked(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    """``hitl serve`` on SQLite and Redis, serving :data:`CHECKED`."""
    assert CHECKED != CONFIG
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    monkeypatch.setenv("WITHDRAW_ORDER", str(tmp_path / "withdraw-order"))
    async with harness_on(request, tmp_path, clock, CHECKED) as h:
        yield h


async def test_an_approval_withdrawn_after_the_gateway_s_own_look_says_withdrawn(
    checked: Harness, tmp_path: Path
) -> None:
    # Withdrawn after the evaluation looked for a withdrawal and before its claim (while the hand-over checks the
    # consequence again): the claim refuses it, and the gateway is told withdrawn, as the earlier look tells it,
    # not handed a 409 error.
    approval_id = await approved(checked, "r-w3")
    # The evaluation's proposal computes the consequence once (its call is found approved); the hand-over's check
    # computes it again, and that run withdraws.
    (tmp_path / "withdraw-order").write_text(f"{checked.bot_url} {FIN1} {approval_id} 1")
    status, no = await ask(checked, "/access/v1/evaluation", evaluation(TO_V1, "r-w3"))
    assert not (tmp_path / "withdraw-order").exists()  # withdrawn in between, by the consequence's run
    assert status == 200 and no == no_longer(approval_id), (status, no)
    _, a = await ask(checked, f"/api/v1/approvals/{approval_id}", None, FIN1, method="GET")
    assert a["status"] == "approved" and [e["event"] for e in a["audit"]].count("withdrawn") == 1, a
    assert await checked.rt.runtime.store.ledger.get(f"call:{approval_id}") is None  # nothing claimed


UNKEEPABLE: list[tuple[str, dict[str, Any]]] = [
    ("a NUL in the session", {"session": "gw\u00001"}),
    ("a NUL in the request id", {"request_id": "r\u0000x"}),
    ("a control character in the request id", {"request_id": "r\u001bx"}),
]


async def test_a_session_or_request_id_with_control_characters_is_400_and_counts_nothing(hitl: Harness) -> None:
    for i in range(3):
        await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, f"c{i}"))  # the velocity used up: now it asks
    for what, context in UNKEEPABLE:
        body = evaluation(TO_V1, "held")
        body["context"] = {**body["context"], **context}
        headers = {"Authorization": "Bearer tok-gateway", "Content-Type": "application/json"}
        url = f"{hitl.bot_url}/access/v1/evaluation"
        async with hitl.http.post(url, data=json.dumps(body), headers=headers) as r:
            refused = await refusal(r)
            assert r.status == 400 and refused["error"]["code"] == "invalid_input", (what, refused)
    status, pending = await ask(hitl, "/api/v1/approvals?status=pending", None, FIN1, method="GET")
    assert status == 200 and pending["items"] == [], pending


async def test_an_approval_whose_arguments_a_reviewer_changed_does_not_admit_the_arguments_asked(hitl: Harness) -> None:
    approval_id, a = await held_call(hitl, "r-m", fillers="fill-")
    edit = {
        "decision": "modify",
        "expected_version": a["version"],
        "action_hash": a["action_hash"],
        "args": {"amount": 1},
    }
    status, modified = await ask(hitl, f"/api/v1/approvals/{approval_id}/decisions", edit, FIN1)
    assert status == 200 and modified["execute_args"] == {"to": "V-1", "amount": 1}, modified
    # The gateway would forward amount 5, which nobody approved: no, and the approval is not handed over.
    for _ in range(2):
        status, no = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-m"))
        assert status == 200 and no == {
            "decision": False,
            "context": {"reason": "modified", "approval_id": approval_id},
        }
    _, a = await ask(hitl, f"/api/v1/approvals/{approval_id}", None, FIN1, method="GET")
    assert a["status"] == "approved"
