"""The service's two extension points. A guard is one registration and may refuse (audited, nothing counted or
stored) or change what is admitted; a fact subscriber observes every step (proposed, allowed, decided, expired,
cancelled) in order, can change no decision, and one that fails leaves the others hearing the fact."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hitl.engine.admission.guards import (
    DECISION_GUARDS,
    PROPOSAL_GUARDS,
    Admission,
    DecisionAttempt,
    GuardedService,
)
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import ErrorCode, InvalidInput
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.subscribers import SUBSCRIBERS
from hitl.engine.subscribers.facts import Allowed, Cancelled, Decided, Expired, Fact, Proposed, Service
from hitl.testing import FakeClock
from tests.service.test_service import CONFIG


class Recorder:
    """An observing measure of a user's own: it only hears."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []

    async def observe(self, fact: Fact, service: Service) -> None:
        match fact:
            case Proposed(approval=a) | Expired(approval=a) | Cancelled(approval=a):
                self.heard.append((type(fact).__name__, a.tool))
            case Decided(approval=a, kind=kind):
                self.heard.append(("Decided", f"{a.tool} {kind} -> {a.status}"))
            case Allowed(request=request, verdict=verdict):
                self.heard.append(("Allowed", f"{request.tool} {verdict.tier}"))


class Broken:
    async def observe(self, fact: Fact, service: Service) -> None:
        raise RuntimeError("a measure with a bug")


class RefundCap:
    """A guard of a user's own: no refund over 10,000 is even proposed."""

    async def admit(self, admission: Admission, service: GuardedService) -> None:
        if admission.request.tool == "refund" and any(i.get("amount", 0) > 10_000 for i in admission.items):
            await service.store.audit.append(admission.refused(ErrorCode.INVALID_INPUT, ": over the refund cap"))
            raise InvalidInput("refunds over 10,000 are not proposed", tool="refund")


class RejectionsNeedAReason:
    """A decision guard that changes nothing but the reason of a rejection that gave none."""

    async def admit(self, attempt: DecisionAttempt, service: GuardedService) -> None:
        if attempt.request.kind is DecisionKind.REJECT and not attempt.request.reason:
            attempt.request = replace(attempt.request, reason="(no reason given)")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def svc(sqlite_store: SqliteStore, clock: FakeClock, recorder: Recorder) -> ApprovalService:
    made = ApprovalService.from_config(parse_config(CONFIG), store=sqlite_store, clock=clock)
    made.subscribers = [*SUBSCRIBERS, Broken(), recorder]
    made.proposal_guards = [*PROPOSAL_GUARDS, RefundCap()]
    made.decision_guards = [*DECISION_GUARDS, RejectionsNeedAReason()]
    return made


async def test_every_step_is_a_fact_and_a_failing_subscriber_changes_nothing(
    svc: ApprovalService, recorder: Recorder, clock: FakeClock
) -> None:
    assert (await svc.propose(ProposeRequest("look_up_order", {"order_id": "1"}, session_id="s"))).may_run
    assert (await svc.propose(ProposeRequest("send_email", {"to": "a@b.c"}, session_id="s"))).may_run
    first = (await svc.propose(ProposeRequest("refund", {"amount": 10}, session_id="s"))).approval
    second = (await svc.propose(ProposeRequest("refund", {"amount": 20}, session_id="s"))).approval
    third = (await svc.propose(ProposeRequest("refund", {"amount": 30}, session_id="s"))).approval
    assert first is not None and second is not None and third is not None
    approved = await svc.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.APPROVE))
    assert approved.status is Status.APPROVED  # the broken subscriber did not undo or block it
    rejected = await svc.decide(DecideRequest(second.id, "U_SUPPORT1", DecisionKind.REJECT))
    assert rejected.reason == "(no reason given)"  # the decision guard changed what was decided
    await svc.cancel(third.id, actor="system", reason="the run ended")
    fourth = (await svc.propose(ProposeRequest("refund", {"amount": 40}, session_id="s"))).approval
    assert fourth is not None
    clock.advance(10 * 86400)
    assert [a.id for a in await svc.expire_due()] == [fourth.id]
    assert recorder.heard == [
        ("Allowed", "look_up_order auto"),
        ("Allowed", "send_email notify"),
        ("Proposed", "refund"),
        ("Proposed", "refund"),
        ("Proposed", "refund"),
        ("Decided", "refund approve -> approved"),
        ("Decided", "refund reject -> rejected"),
        ("Cancelled", "refund"),
        ("Proposed", "refund"),
        ("Expired", "refund"),
    ]


async def test_a_registered_guard_refuses_before_anything_is_counted_or_stored(
    svc: ApprovalService, recorder: Recorder, sqlite_store: SqliteStore
) -> None:
    with pytest.raises(InvalidInput, match="refund cap|not proposed"):
        await svc.propose(ProposeRequest("refund", {"amount": 50_000}, session_id="s"))
    assert recorder.heard == []
    assert (await sqlite_store.approvals.list_pending(limit=10)).items == []
    [entry] = [e for e in await sqlite_store.audit.entries() if e.event == "refused"]
    assert entry.detail == "s: refund: over the refund cap" and entry.actor == "agent:riley"


class DecisionsOnly:
    """Says what it observes, and which of those it wants: only rejections."""

    observes = (Decided,)

    def __init__(self) -> None:
        self.heard: list[str] = []

    def wants(self, fact: Fact, service: Service) -> bool:
        return isinstance(fact, Decided) and fact.kind is DecisionKind.REJECT

    async def observe(self, fact: Fact, service: Service) -> None:
        assert isinstance(fact, Decided)
        self.heard.append(fact.approval.id)


async def test_a_subscriber_hears_only_the_facts_it_observes_and_wants(svc: ApprovalService) -> None:
    only = DecisionsOnly()
    svc.subscribers = [*svc.subscribers, only]  # a new list: the routes are worked out again
    first = (await svc.propose(ProposeRequest("refund", {"amount": 10}, session_id="s"))).approval
    second = (await svc.propose(ProposeRequest("refund", {"amount": 20}, session_id="s"))).approval
    assert first is not None and second is not None
    await svc.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.APPROVE))
    await svc.decide(DecideRequest(second.id, "U_SUPPORT1", DecisionKind.REJECT, reason="no"))
    assert only.heard == [second.id]
