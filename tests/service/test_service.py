from __future__ import annotations

from typing import Any

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, InvalidInput, NotFound
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.bound_decisions import bound_request

CONFIG = """
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2], finance: [U_FIN1, U_FIN2, U_FIN3]}
policy:
  allowed_tools: [look_up_order]
  denied_tools: [drop_database]
  trust_ttl: 10m
  tools:
    refund: {tier: approve, role: support}
    delete_customer: {tier: approve, role: support, trustable: false, reason_required: true}
    send_email: {tier: notify}
  rules:
    - {name: large_refund, tools: [refund], when: "args.amount > 500", tier: escalate, role: finance, quorum: 2}
"""


class RecordingNotifier:
    decision_jobs = ("card",)

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.queued: list[bool] = []

    async def approval_requested(self, approval: Approval) -> None:
        self.events.append(("requested", approval.id))

    async def approval_changed(self, approval: Approval, *, queued: bool = False) -> None:
        self.events.append(("changed", (approval.id, str(approval.status))))
        self.queued.append(queued)

    async def action_notified(self, *, tool: str, args: dict[str, Any], session_id: str, reason: str) -> None:
        self.events.append(("notified", tool))


@pytest.fixture
def notifier() -> RecordingNotifier:
    return RecordingNotifier()


@pytest.fixture
def svc(sqlite_store: SqliteStore, clock: FakeClock, notifier: RecordingNotifier) -> ApprovalService:
    return ApprovalService.from_config(parse_config(CONFIG), store=sqlite_store, clock=clock, notifier=notifier)


async def test_auto_notify_denied_and_approval(svc: ApprovalService, notifier: RecordingNotifier) -> None:
    assert (await svc.propose(ProposeRequest("look_up_order", {"order_id": "1"}, session_id="s"))).may_run
    n = await svc.propose(ProposeRequest("send_email", {"to": "x"}, session_id="s"))
    assert n.may_run and ("notified", "send_email") in notifier.events
    d = await svc.propose(ProposeRequest("drop_database", {}, session_id="s"))
    assert d.verdict.denied and not d.may_run
    p = await svc.propose(ProposeRequest("refund", {"amount": 10}, session_id="s", evidence="mail me at a@b.io"))
    assert p.approval is not None and p.created and not p.may_run
    assert p.approval.evidence == "mail me at [email]" and ("requested", p.approval.id) in notifier.events
    again = await svc.propose(ProposeRequest("refund", {"amount": 10.0}, session_id="s"))
    assert again.approval == p.approval and not again.created


async def test_decide_binds_and_reports(svc: ApprovalService, notifier: RecordingNotifier) -> None:
    p = await svc.propose(ProposeRequest("refund", {"amount": 10}, session_id="s"))
    assert p.approval is not None
    with pytest.raises(DecisionRefused) as err:
        await svc.decide(DecideRequest(p.approval.id, "U_FIN1", DecisionKind.APPROVE))
    assert err.value.code is ErrorCode.NOT_ELIGIBLE
    with pytest.raises(InvalidInput):
        await svc.decide(DecideRequest(p.approval.id, "bad\nid", DecisionKind.APPROVE))
    with pytest.raises(NotFound):
        await svc.decide(DecideRequest("apr_NOPE", "U_SUPPORT1", DecisionKind.APPROVE))
    out = await svc.decide(bound_request(p.approval, "U_SUPPORT1", via="cli"))
    assert out.status is Status.APPROVED
    assert ("changed", (out.id, "approved")) in notifier.events
    # The notifier's job was queued by the decision's own store step, and the notifier was told so.
    assert notifier.queued[-1] is True
    jobs = await svc.store.jobs.claim("w", kind="card", limit=5, now=0.0, lease=30)
    assert [j.payload for j in jobs] == [{"approval_id": out.id}]


async def test_modify_same_tier_approves_with_new_args(svc: ApprovalService) -> None:
    p = await svc.propose(ProposeRequest("refund", {"amount": 100, "order_id": "1"}, session_id="s"))
    assert p.approval is not None
    out = await svc.decide(
        DecideRequest(p.approval.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": 80, "order_id": "1"})
    )
    assert out.status is Status.APPROVED and out.execute_args == {"amount": 80, "order_id": "1"}


async def test_modify_raising_tier_supersedes(svc: ApprovalService, notifier: RecordingNotifier) -> None:
    p = await svc.propose(ProposeRequest("refund", {"amount": 100}, session_id="s"))
    assert p.approval is not None
    out = await svc.decide(DecideRequest(p.approval.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": 900}))
    assert out.status is Status.SUPERSEDED and out.superseded_by
    new = await svc.store.approvals.get(out.superseded_by)
    assert (new.tier, new.required_role, new.quorum, new.args) == (
        Tier.ESCALATE,
        "finance",
        2,
        {"amount": 900},
    )
    assert new.status is Status.PENDING and ("requested", new.id) in notifier.events
    # A refused modification leaves no orphan pending replacement behind.
    q = await svc.propose(ProposeRequest("refund", {"amount": 101}, session_id="s"))
    assert q.approval is not None
    with pytest.raises(DecisionRefused):
        await svc.decide(DecideRequest(q.approval.id, "agent:riley", DecisionKind.MODIFY, args={"amount": 901}))
    pending = (await svc.store.approvals.list_pending(roles=["finance"])).items
    assert [a.id for a in pending] == [new.id]


async def test_trust_grants_session_trust_with_ttl(
    svc: ApprovalService, clock: FakeClock, notifier: RecordingNotifier, sqlite_store: SqliteStore
) -> None:
    p = await svc.propose(ProposeRequest("refund", {"amount": 10}, session_id="s1"))
    assert p.approval is not None
    await svc.decide(DecideRequest(p.approval.id, "U_SUPPORT1", DecisionKind.TRUST))
    assert ("notified", "refund") not in notifier.events
    assert (await svc.propose(ProposeRequest("refund", {"amount": 11}, session_id="s1"))).may_run
    # What the Trust let through is seen, not only granted: audited, and told to reviewers as an FYI.
    assert ("notified", "refund") in notifier.events
    [seen] = [e for e in await sqlite_store.audit.entries() if e.event == "trusted"]
    assert seen.detail.startswith("s1: refund ran with an FYI") and "a reviewer trusted refund" in seen.detail
    assert not (await svc.propose(ProposeRequest("refund", {"amount": 11}, session_id="s2"))).may_run
    assert not (
        await svc.propose(ProposeRequest("refund", {"amount": 600}, session_id="s1"))
    ).may_run  # rules still raise
    clock.advance(601)
    assert not (await svc.propose(ProposeRequest("refund", {"amount": 12}, session_id="s1"))).may_run
    d = await svc.propose(ProposeRequest("delete_customer", {"id": "C1"}, session_id="s1"))
    assert d.approval is not None and not d.approval.trustable
    with pytest.raises(DecisionRefused) as err:
        await svc.decide(DecideRequest(d.approval.id, "U_SUPPORT1", DecisionKind.TRUST))
    assert err.value.code is ErrorCode.NOT_TRUSTABLE


async def test_reason_required_and_bad_input_write_nothing(svc: ApprovalService) -> None:
    d = await svc.propose(ProposeRequest("delete_customer", {"id": "C1"}, session_id="s"))
    assert d.approval is not None
    with pytest.raises(InvalidInput, match="needs a reason"):
        await svc.decide(DecideRequest(d.approval.id, "U_SUPPORT1", DecisionKind.REJECT))
    assert (await svc.store.approvals.get(d.approval.id)).version == 1
    for bad_tool, bad_args in [
        ("", {}),
        ("x" * 200, {}),
        ("t", [1, 2]),
        ("t", {"n": float("nan")}),
        ("refund — approved by the CFO", {}),
        ("<!channel>", {}),
        ("a\nb", {}),
    ]:
        with pytest.raises(EngineError):
            await svc.propose(ProposeRequest(bad_tool, bad_args, session_id="s"))  # type: ignore[arg-type]
    assert len((await svc.store.approvals.list_pending()).items) == 1


async def test_explain_records_nothing(svc: ApprovalService) -> None:
    v = await svc.explain("refund", {"amount": 900})
    assert v.tier is Tier.ESCALATE
    assert (await svc.store.approvals.list_pending()).items == []


async def test_expiry_through_the_service(svc: ApprovalService, clock: FakeClock, notifier: RecordingNotifier) -> None:
    p = await svc.propose(ProposeRequest("refund", {"amount": 10}, session_id="s"))
    assert p.approval is not None
    clock.advance(3601)
    expired = await svc.expire_due()
    assert [a.status for a in expired] == [Status.EXPIRED]
    assert ("changed", (p.approval.id, "expired")) in notifier.events
    assert notifier.queued[-1] is False  # not a decision: the notifier queues its own job


ALLOWED = """
policy:
  allowed_tools: [look_up_order]
  tools:
    look_up_order:
      tier: auto
      schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    refund: {tier: approve}
"""
CALL_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string", "maxLength": 4}}}


async def test_a_call_its_tool_name_lets_run_is_checked_halted_and_counted_like_any_other(
    sqlite_store: SqliteStore, clock: FakeClock
) -> None:
    """The allowed path is worked out once per tool, and still checks every call: both schemas (refusals audited,
    nothing counted), the stop switch, and the count toward the metrics."""
    svc = ApprovalService.from_config(parse_config(ALLOWED), store=sqlite_store, clock=clock)

    async def ask(args: dict[str, Any], schema: dict[str, Any] | None = None) -> bool:
        return (await svc.propose(ProposeRequest("look_up_order", args, session_id="s", schema=schema))).may_run

    assert await ask({"order_id": "1"}, CALL_SCHEMA) and await ask({"order_id": "2"})
    with pytest.raises(InvalidInput, match="hitl.yaml"):
        await ask({"order_id": "3", "extra": True})
    with pytest.raises(InvalidInput, match="the call"):
        await ask({"order_id": "12345"}, CALL_SCHEMA)
    await svc.switch.halt("look_up_order", by="U_ADMIN", reason="lookups look wrong")
    with pytest.raises(EngineError) as halted:
        await ask({"order_id": "4"})
    assert halted.value.code is ErrorCode.HALTED
    await svc.switch.lift("look_up_order", by="U_ADMIN")
    assert await ask({"order_id": "5"})

    refused = [e.outcome for e in await sqlite_store.audit.entries() if e.event == "refused"]
    assert refused == ["invalid_input", "invalid_input", "halted"]
    await sqlite_store.tallies.flush()
    counted = await sqlite_store.tallies.read(since=clock.now() - 3600, now=clock.now())
    assert counted == {("look_up_order", "auto", "autonomous"): 3.0}  # the three that ran


async def test_a_new_policy_or_spot_check_decides_the_next_call_at_once(
    sqlite_store: SqliteStore, clock: FakeClock
) -> None:
    svc = ApprovalService.from_config(parse_config(ALLOWED), store=sqlite_store, clock=clock)
    first = await svc.propose(ProposeRequest("look_up_order", {"order_id": "1"}, session_id="s"))
    assert first.may_run and first.approval is None

    svc.spot_check = parse_config("oversight: {spot_check: {tools: {look_up_order: 1.0}}}").oversight.spot_check
    sampled = await svc.propose(ProposeRequest("look_up_order", {"order_id": "2"}, session_id="s"))
    assert sampled.may_run
    checks = (await sqlite_store.approvals.list_pending()).items
    assert [a.tool for a in checks] == ["spot:look_up_order"]

    svc.policy = parse_config("policy: {tools: {look_up_order: {tier: approve}}}").build_policy()
    asked = await svc.propose(ProposeRequest("look_up_order", {"order_id": "3"}, session_id="s"))
    assert not asked.may_run and asked.approval is not None and asked.approval.tier is Tier.APPROVE
