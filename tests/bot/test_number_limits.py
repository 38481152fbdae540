"""Any input size gets a clear answer: a number beyond what JSON interchange carries exactly (an integer past
±(2**53 - 1), or thousands of digits) is an inline form error in the Modify modal and its JSON editor, a 422 from
the HTTP API and a coded ``invalid_input`` in process; it never reaches a traceback and changes nothing."""

from __future__ import annotations

import copy
import logging

import pytest

from hitl.bot.views.controls import ACTION_MODIFY
from hitl.engine.domain.hashing import MAX_EXACT_INT, normalize
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.errors import ErrorCode, InvalidInput
from tests.bot.conftest import Harness
from tests.bot.test_modals_and_commands import field_values, last_view, propose

TOO_LARGE = ["9" * 10_000, str(MAX_EXACT_INT + 2), f"-{MAX_EXACT_INT + 1}", "1e300"]


@pytest.mark.parametrize("text", TOO_LARGE)
async def test_the_modify_form_answers_a_number_too_large_inline(
    sqlite_harness: Harness, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = sqlite_harness
    a = await propose(h, session=f"ses_big_{len(text)}")
    await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(a.id)), ACTION_MODIFY)
    view_id, view = last_view(h)
    with caplog.at_level(logging.WARNING):
        r = await h.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=text))
        await h.settle()
    assert r.status == 200 and r.json()["response_action"] == "errors"
    message = r.json()["errors"]["hitl_field:amount"]
    assert str(MAX_EXACT_INT) in message and len(message) <= 150
    assert (await h.svc.store.approvals.get(a.id)).version == 1
    assert not [rec for rec in caplog.records if rec.exc_info or rec.levelno >= logging.ERROR]


async def test_the_json_editor_answers_a_number_too_large_inline(sqlite_harness: Harness) -> None:
    h = sqlite_harness
    p = await h.svc.propose(ProposeRequest("delete_customer", {"customer_id": "C-2001"}, session_id="ses_json_big"))
    assert p.approval is not None
    await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(p.approval.id)), ACTION_MODIFY)
    view_id, view = last_view(h)
    for raw in ('{"customer_id": ' + "7" * 5000 + "}", '{"customer_id": 9007199254740993}'):
        r = await h.slack.submit("U_SUPPORT1", view_id, field_values(view, hitl_args=raw))
        assert r.json()["response_action"] == "errors" and str(MAX_EXACT_INT) in r.json()["errors"]["hitl_args"]
    assert (await h.svc.store.approvals.get(p.approval.id)).version == 1


async def test_a_proposal_with_a_number_too_large_is_refused_with_its_code(sqlite_harness: Harness) -> None:
    for amount in (MAX_EXACT_INT + 1, -(2**70), 1e300):
        with pytest.raises(InvalidInput) as err:
            await sqlite_harness.svc.propose(
                ProposeRequest("refund", {"order_id": "1", "customer_id": "C", "amount": amount}, session_id="big")
            )
        assert err.value.code is ErrorCode.INVALID_INPUT and str(MAX_EXACT_INT) in err.value.message
    assert normalize({"n": MAX_EXACT_INT, "m": -MAX_EXACT_INT, "f": 0.5}) == {
        "n": MAX_EXACT_INT,
        "m": -MAX_EXACT_INT,
        "f": 0.5,
    }
