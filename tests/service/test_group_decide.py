"""The service's group decision on a real SQLite store: each member through the single decide's atomic step, each
outcome in the request's order; a request that cannot be a group decision is refused before anything is read."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.group_outcome import MemberResult
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import GroupDecideRequest, GroupMember, ProposeRequest
from hitl.engine.errors import ErrorCode, InvalidInput
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.service.test_service import CONFIG


def member(a: Approval) -> GroupMember:
    return GroupMember(a.id, a.version, a.action_hash)


async def test_the_service_decides_each_member_on_its_own(sqlite_store: SqliteStore, clock: FakeClock) -> None:
    svc = ApprovalService.from_config(parse_config(CONFIG), store=sqlite_store, clock=clock)
    asked = [await svc.propose(ProposeRequest("refund", {"amount": n}, session_id=f"s{n}")) for n in (10, 20, 900)]
    small, other, large = (p.approval for p in asked)
    assert small is not None and other is not None and large is not None
    out = await svc.decide_group(
        GroupDecideRequest((member(small), member(other), member(large)), "U_SUPPORT1", DecisionKind.APPROVE)
    )
    assert [(m.approval_id, m.result, m.code) for m in out.members] == [
        (small.id, MemberResult.DECIDED, None),
        (other.id, MemberResult.DECIDED, None),
        (large.id, MemberResult.REFUSED, ErrorCode.NOT_ELIGIBLE),
    ]
    assert (await sqlite_store.approvals.get(other.id)).status is Status.APPROVED
    out = await svc.decide_group(GroupDecideRequest((member(large),), "U_FIN1", DecisionKind.APPROVE))
    assert [(m.result, m.still_needs) for m in out.members] == [(MemberResult.VOTED, 1)] and not out.decided

    wrong: list[tuple[tuple[GroupMember, ...], DecisionKind]] = [
        ((), DecisionKind.APPROVE),  # nobody
        ((member(large), member(large)), DecisionKind.APPROVE),  # one twice
        ((member(large),), DecisionKind.TRUST),  # one approval's decision
    ]
    for members, kind in wrong:
        with pytest.raises(InvalidInput):
            GroupDecideRequest(members, "U_FIN1", kind)
