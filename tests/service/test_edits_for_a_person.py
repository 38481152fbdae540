"""A reviewer's edit of an approval made for a person (an agent acting for them, ``on_behalf_of``), on every store
(Redis decides in a Lua script of its own): an edit that needs more approvers makes a new approval that is still
that person's call, so they never decide it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Status, Tier
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import DecisionRefused, ErrorCode
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.testing import FakeClock

CONFIG = """
roles:
  support: [U_SUPPORT1, U_SUPPORT2, U_SUPPORT3]
policy:
  tools:
    pay: {tier: approve, role: support}
  rules:
    - name: big_payment
      tools: [pay]
      when: "args.amount > 100"
      tier: escalate
"""


def service(store: Store) -> ApprovalService:
    return ApprovalService.from_config(parse_config(CONFIG), store=store, clock=FakeClock())


async def test_an_edit_that_asks_more_is_still_the_persons_call(opener: Callable[[], Store]) -> None:
    svc = service(opener())
    asked = await svc.propose(ProposeRequest("pay", {"amount": 10}, session_id="s", on_behalf_of="U_SUPPORT1"))
    assert asked.approval is not None and asked.approval.on_behalf_of == "U_SUPPORT1"
    edited = await svc.decide(DecideRequest(asked.approval.id, "U_SUPPORT2", DecisionKind.MODIFY, args={"amount": 500}))
    assert edited.status is Status.SUPERSEDED and edited.superseded_by is not None
    again = await svc.store.approvals.get(edited.superseded_by)
    assert (again.tier, again.on_behalf_of) == (Tier.ESCALATE, "U_SUPPORT1")
    with pytest.raises(DecisionRefused) as refused:  # the person behind the call, a reviewer of its role
        await svc.decide(DecideRequest(again.id, "U_SUPPORT1", DecisionKind.APPROVE))
    assert refused.value.code is ErrorCode.SELF_APPROVAL
    done = await svc.decide(DecideRequest(again.id, "U_SUPPORT3", DecisionKind.APPROVE))
    assert done.status is Status.APPROVED
