"""The ask API and guard on both real stores."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, assert_type

import pytest

from hitl.engine.agents.ask import ActionRejected, Approvals
from hitl.engine.agents.gate import GateRefused, ToolCall
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.caps import CapSpec, CapsSpec
from hitl.engine.domain.models import DecisionKind, Status, Tier
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import DecisionRefused, ErrorCode, Flooded, InvalidInput
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.waiting import eventually

CONFIG = parse_config("""
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  allowed_tools: [look_up_order]
  tools: {refund: {tier: approve, role: support, timeout: 10m}}
""")


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store(fresh_store_url(request.param, request, tmp_path, tag="ask"))
    yield s
    await s.close()


def service(store: Store, clock: FakeClock) -> ApprovalService:
    return ApprovalService.from_config(CONFIG, store=store, clock=clock)


async def wait_pending(store: Store) -> str:
    async def first() -> str | None:
        items = (await store.approvals.list_pending()).items
        return items[0].id if items else None

    return await eventually(first, what="a pending approval", interval=0.005)


async def test_ask_waits_for_a_decision_from_another_replica(store: Store, clock: FakeClock) -> None:
    agent = Approvals(service(store, clock))
    reviewer_side = service(store, clock)  # a second service instance, like a bot replica
    assert (await agent.ask("look_up_order", {"order_id": "1"}, session="s")).approved
    task = asyncio.create_task(agent.ask("refund", {"order_id": "1", "amount": 30}, session="s", evidence="hi"))
    aid = await wait_pending(store)
    await reviewer_side.decide(
        DecideRequest(aid, "U_SUPPORT1", DecisionKind.MODIFY, args={"order_id": "1", "amount": 25})
    )
    answer = await asyncio.wait_for(task, 5)
    assert answer.approved and answer.modified and answer.args == {"order_id": "1", "amount": 25}


async def test_restart_reattaches_and_cancelled_wait_leaves_it_decidable(store: Store, clock: FakeClock) -> None:
    first = Approvals(service(store, clock))
    task = asyncio.create_task(first.ask("refund", {"order_id": "2", "amount": 10}, session="s"))
    aid = await wait_pending(store)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert (await store.approvals.get(aid)).status is Status.PENDING
    await service(store, clock).decide(DecideRequest(aid, "U_SUPPORT2", DecisionKind.REJECT, reason="no"))
    restarted = Approvals(service(store, clock))
    answer = await restarted.ask("refund", {"order_id": "2", "amount": 10.0}, session="s")
    assert answer.status == "rejected" and answer.reason == "no" and answer.approval is not None
    assert answer.approval.id == aid and len((await store.approvals.list_pending()).items) == 0


async def test_expiry_is_reported_as_expired(store: Store, clock: FakeClock) -> None:
    agent = Approvals(service(store, clock))
    task = asyncio.create_task(agent.ask("refund", {"order_id": "3", "amount": 10}, session="s", wait=3600))
    await wait_pending(store)
    clock.advance(601)
    await service(store, clock).expire_due()
    answer = await asyncio.wait_for(task, 5)
    assert answer.status == "expired" and not answer.approved


async def test_guard_runs_once_with_approved_args(store: Store, clock: FakeClock) -> None:
    agent = Approvals(service(store, clock))
    calls: list[dict[str, Any]] = []

    @agent.guard(session="s")
    def refund(order_id: str, amount: float) -> str:
        calls.append({"order_id": order_id, "amount": amount})
        return f"refunded {amount}"

    task = asyncio.create_task(refund("9", 40))
    aid = await wait_pending(store)
    await service(store, clock).decide(DecideRequest(aid, "U_SUPPORT1", DecisionKind.APPROVE))
    result = await asyncio.wait_for(task, 5)
    assert_type(result, str)  # the guarded function keeps its parameters and result under a type checker
    assert result == "refunded 40"
    assert calls == [{"order_id": "9", "amount": 40}]
    assert (await store.approvals.get(aid)).status is Status.EXECUTED
    # An approval authorizes one execution: the identical call again is a new request, not a re-run.
    again = asyncio.create_task(refund("9", 40))
    aid_again = await wait_pending(store)
    assert aid_again != aid
    await service(store, clock).decide(
        DecideRequest(aid_again, "U_SUPPORT1", DecisionKind.REJECT, reason="already refunded")
    )
    with pytest.raises(ActionRejected, match="already refunded"):
        await asyncio.wait_for(again, 5)
    assert calls == [{"order_id": "9", "amount": 40}]

    @agent.guard(tool="refund", session="s")
    async def refund_other(order_id: str, amount: float) -> str:
        return "never"

    task2 = asyncio.create_task(refund_other("10", 5))
    assert_type(task2, asyncio.Task[str])  # an async function's result is awaited once, not twice
    aid2 = next(a.id for a in (await _pending_eventually(store)) if a.args["order_id"] == "10")
    await service(store, clock).decide(DecideRequest(aid2, "U_SUPPORT2", DecisionKind.REJECT, reason="fraud"))
    with pytest.raises(ActionRejected, match="fraud"):
        await asyncio.wait_for(task2, 5)


async def _pending_eventually(store: Store) -> list[Any]:
    await wait_pending(store)
    return (await store.approvals.list_pending()).items


async def test_a_wait_that_gives_up_closes_the_approval(store: Store, clock: FakeClock) -> None:
    """The agent was told "no" (it stopped waiting): nobody may approve it behind its back any more."""
    agent = Approvals(service(store, clock))
    answer = await agent.ask("refund", {"order_id": "7", "amount": 10}, session="gave-up", wait=0)
    assert answer.status == "cancelled" and not answer.approved and answer.approval is not None
    assert "stopped waiting" in (answer.reason or "")
    closed = await store.approvals.get(answer.approval.id)
    assert closed.status is Status.CANCELLED
    with pytest.raises(DecisionRefused) as late:
        await service(store, clock).decide(DecideRequest(closed.id, "U_SUPPORT1", DecisionKind.APPROVE))
    assert late.value.code is ErrorCode.ALREADY_DECIDED
    events = [e.event for e in await store.audit.entries(approval_id=closed.id)]
    assert events[:2] == ["created", "cancelled"] and events[-1] == "refused"


def count_waiters(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every approval a caller starts waiting on, in order (to decide only once every caller is attached)."""
    seen: list[str] = []
    inner = store.approvals.wait_changed

    async def counted(approval_id: str, **kw: Any) -> Any:
        seen.append(approval_id)
        return await inner(approval_id, **kw)

    monkeypatch.setattr(store.approvals, "wait_changed", counted)
    return seen


async def attached(waiting: list[str], n: int) -> str:
    await eventually(lambda: len(waiting) >= n, what=f"{n} callers waiting", interval=0.005)
    assert len(set(waiting)) == 1, waiting  # one approval shared by every caller
    return waiting[0]
    raise AssertionError(f"{len(waiting)} of {n} callers waited")


async def test_concurrent_askers_of_one_approval_get_one_hand_over(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five callers ask for the same action in one session at once: one approval, one Approve, and exactly one
    of them is told to act; the other four are told it went to another caller, naming the approval."""
    waiting = count_waiters(store, monkeypatch)
    askers = [Approvals(service(store, clock)) for _ in range(5)]  # as five agent processes would
    tasks = [asyncio.create_task(a.ask("refund", {"order_id": "5", "amount": 50}, session="s-many")) for a in askers]
    aid = await attached(waiting, 5)
    assert [a.id for a in (await store.approvals.list_pending()).items] == [aid]
    await service(store, clock).decide(DecideRequest(aid, "U_SUPPORT1", DecisionKind.APPROVE))
    answers = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert {a.approval.id for a in answers if a.approval} == {aid}
    go = [a for a in answers if a.approved]
    elsewhere = [a for a in answers if a.status == "handed_elsewhere"]
    assert len(go) == 1 and len(elsewhere) == 4, [a.status for a in answers]
    assert all(not a.approved and a.args == {} and aid in (a.reason or "") for a in elsewhere)
    assert (await store.approvals.get(aid)).status is Status.EXECUTED


async def test_concurrent_guarded_calls_of_one_approval_run_once(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = count_waiters(store, monkeypatch)
    agents = [Approvals(service(store, clock)) for _ in range(4)]
    ran: list[int] = []

    def guarded(agent: Approvals, n: int) -> Any:
        @agent.guard(tool="refund", session="s-guard")
        async def refund(order_id: str, amount: float) -> str:
            ran.append(n)
            await asyncio.sleep(0.01)  # others arrive while it runs
            return "refunded"

        return refund

    tasks = [asyncio.create_task(guarded(a, n)("6", 60)) for n, a in enumerate(agents)]
    aid = await attached(waiting, 4)
    await service(store, clock).decide(DecideRequest(aid, "U_SUPPORT1", DecisionKind.APPROVE))
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
    assert len(ran) == 1
    assert [r for r in results if r == "refunded"] == ["refunded"]
    refused = [r for r in results if isinstance(r, ActionRejected)]
    assert len(refused) == 3 and all(r.context["status"] == "handed_elsewhere" and aid in r.message for r in refused)


async def test_a_caller_that_reaches_a_finished_execution_is_not_handed_its_output(
    store: Store, clock: FakeClock
) -> None:
    """Two agents (two Approvals, as two processes would have) both hold the approved ticket; the first runs the
    action, the second arrives only after it finished: it is refused (handed elsewhere), never given the first's
    output as its own. Each gate has a name of its own in the claims (it was the framework's name, shared by all)."""
    first, second = Approvals(service(store, clock)), Approvals(service(store, clock))
    assert first.gate.worker_id != second.gate.worker_id
    assert first.gate.worker_id.startswith("ask:")
    call = ToolCall("refund", {"order_id": "7", "amount": 70}, session="s-late", framework="ask")
    pending = await first.gate.check(call)
    assert pending.pending and pending.approval is not None
    await service(store, clock).decide(DecideRequest(pending.approval.id, "U_SUPPORT1", DecisionKind.APPROVE))
    mine, theirs = await first.gate.check(call), await second.gate.check(call)
    assert mine.runs and theirs.runs and mine.approval == theirs.approval  # both hold the approved ticket
    ran: list[str] = []

    async def refund(order_id: str, amount: float) -> str:
        ran.append(order_id)
        return "refunded"

    assert await first.gate.execute(mine, refund) == "refunded"
    with pytest.raises(GateRefused) as refused:
        await second.gate.execute(theirs, refund)
    assert refused.value.code is ErrorCode.HANDED_ELSEWHERE and pending.approval.id in refused.value.message
    assert ran == ["7"]


async def test_arguments_that_break_a_schema_never_become_an_approval(store: Store, clock: FakeClock) -> None:
    """The schema sent with the call (an adapter's tool schema, an MCP inputSchema) is checked before the policy
    counts anything: a coded error naming each bad field, no approval, the refusal audited."""
    agent = Approvals(service(store, clock))
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "amount": {"type": "number", "maximum": 1000}},
        "required": ["order_id", "amount"],
        "additionalProperties": False,
    }
    with pytest.raises(InvalidInput) as bad:
        await agent.ask("refund", {"amount": 5000, "note": "x"}, session="s-schema", schema=schema)
    assert bad.value.code is ErrorCode.INVALID_INPUT
    assert set(bad.value.context["fields"]) == {"order_id", "amount", "note"}
    assert (await store.approvals.list_pending()).items == []
    trail = await store.audit.entries()
    assert [(e.event, e.outcome) for e in trail] == [("refused", "invalid_input")]
    assert "s-schema" in trail[0].detail and "the call" in trail[0].detail


SUMS = parse_config("""
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2], finance: [U_FIN1, U_FIN2, U_FIN3]}
policy:
  tools: {refund: {tier: approve, role: support, timeout: 1h}}
  rules:
    - {name: large_refund, tools: [refund], when: "args.amount > 500", tier: escalate, role: finance, quorum: 2}
    - name: split_refunds
      tools: [refund]
      rolling_sum: {subject: args.customer_id, value: args.amount, window: 24h, threshold: 500}
      tier: escalate
      role: finance
      quorum: 2
""")


async def test_rolling_sums_count_only_what_ran_or_may_still_run(store: Store, clock: FakeClock) -> None:
    """120 executed, then 899 escalated and edited down to 150: the edit is judged on 120 + 150 (the 899 never
    ran), and later requests count what was approved, not what was first proposed."""
    svc = ApprovalService.from_config(SUMS, store=store, clock=clock)

    async def ask(amount: float, session: str) -> Any:
        p = await svc.propose(ProposeRequest("refund", {"customer_id": "C-9", "amount": amount}, session_id=session))
        assert p.approval is not None
        return p.approval

    first = await ask(120, "s1")
    await svc.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.APPROVE))
    big = await ask(899, "s2")
    assert big.rule == "large_refund"
    edited = await svc.decide(
        DecideRequest(big.id, "U_FIN1", DecisionKind.MODIFY, args={"customer_id": "C-9", "amount": 150})
    )
    assert edited.status is Status.SUPERSEDED and edited.superseded_by  # two approvers: an edit asks again
    again = await store.approvals.get(edited.superseded_by)
    assert again.rule != "split_refunds" and not any("split" in r for r in again.reasons), again.reasons
    await svc.decide(
        DecideRequest(
            again.id, str(again.required_role == "finance" and "U_FIN2" or "U_SUPPORT2"), DecisionKind.APPROVE
        )
    )
    # 120 + 150 = 270 so far; a rejected 100 never counts, so 200 more stays under 500 (570 if it did).
    rejected = await ask(100, "s3")
    assert rejected.rule == "tool_tier", rejected.reasons
    await svc.decide(DecideRequest(rejected.id, "U_SUPPORT1", DecisionKind.REJECT, reason="no"))
    small = await ask(200, "s4")
    assert small.rule == "tool_tier" and small.tier is Tier.APPROVE, small.reasons
    over = await ask(60, "s5")  # 120 + 150 + 200 (pending, may still run) + 60 = 530
    assert over.rule == "split_refunds"
    assert "530 within 1d: 60 now + 470 from 3 earlier requests" in over.reasons[-1], over.reasons


async def test_ask_and_guard_over_a_cap_raise_approval_flood_and_run_nothing(store: Store, clock: FakeClock) -> None:
    capped = CONFIG.model_copy(
        update={"policy": CONFIG.policy.model_copy(update={"caps": CapsSpec(session=CapSpec(max=1, per=60))})}
    )
    agent = Approvals(ApprovalService.from_config(capped, store=store, clock=clock))
    first = asyncio.create_task(agent.ask("refund", {"order_id": "1", "amount": 5}, session="flood"))
    await wait_pending(store)
    with pytest.raises(Flooded) as asked:
        await agent.ask("refund", {"order_id": "2", "amount": 6}, session="flood", wait=1)
    assert asked.value.code is ErrorCode.APPROVAL_FLOOD and asked.value.retryable
    ran: list[str] = []

    @agent.guard(tool="refund", session="flood")
    def refund(order_id: str, amount: float) -> str:
        ran.append(order_id)
        return "refunded"

    with pytest.raises(Flooded):
        await refund("3", 7)
    assert ran == [] and len((await store.approvals.list_pending()).items) == 1
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)


REDACTING = parse_config("""
requester: agent:riley
roles: {support: [U_SUPPORT1]}
redaction:
  evidence_limit: 2000
  patterns: [{label: acct, regex: '[a-z]+\\d{6}'}]
policy:
  tools: {refund: {tier: approve, role: support, timeout: 10m}}
""")


async def test_evidence_is_cut_to_its_limit_before_any_pattern_reads_it(store: Store, clock: FakeClock) -> None:
    """An in-process ask has no request size limit: 1 MB of evidence costs what 50 KB costs, an operator's pattern
    (quadratic on a long run of letters) included, and what is kept is redacted."""
    agent = Approvals(ApprovalService.from_config(REDACTING, store=store, clock=clock))
    asked = iter(range(100))

    async def ask(evidence: str) -> str:
        answer = await agent.ask(
            "refund", {"order_id": "1", "amount": 5}, session=f"s{next(asked)}", evidence=evidence, wait=0
        )
        assert answer.status == "cancelled" and answer.approval is not None  # it stopped waiting at once
        return answer.approval.evidence

    async def cpu(evidence: str) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            await ask(evidence)
            best = min(best, time.process_time() - start)
        return best

    kept = await ask("customer abc123456 wrote: " + "a" * 1_000_000)
    assert kept.startswith("customer [acct] wrote: aaa") and kept.endswith("…")
    assert len(kept) == 2000 - len("abc123456") + len("[acct]")  # cut to 1,999 characters first, then redacted
    ratio = await cpu("a" * 1_000_000) / max(await cpu("a" * 50_000), 1e-6)
    assert ratio < 40, ratio


COUNTED = parse_config("""
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  allowed_tools: [look_up_order, top_up]
  rules:
    - name: look_up_burst
      tools: [look_up_order]
      velocity: {subject: args.order_id, max: 3, window: 1h}
      tier: approve
      role: support
    - name: top_up_sum
      tools: [top_up]
      rolling_sum: {subject: args.customer_id, value: args.amount, window: 24h, threshold: 100}
      tier: approve
      role: support
""")
"""Allowed tools limited by counting: a look-up runs 3 times an hour per order, top-ups 100 a day per customer."""


async def asked_a_person(store: Store, task: asyncio.Task[Any]) -> str:
    """The pending approval ``task``'s call waits on; fails at once if the call finished instead (it ran)."""

    async def pending() -> str | None:
        if task.done():
            raise AssertionError(f"the call did not wait for a person: {task.result()!r}")
        items = (await store.approvals.list_pending()).items
        return items[0].id if items else None

    return await eventually(pending, what="a pending approval", interval=0.005)


async def test_the_same_unnamed_call_is_counted_each_time_it_runs(store: Store, clock: FakeClock) -> None:
    """A guarded call has no call id: asked again with the same arguments it is another call, counted again, so
    velocity max 3 lets 3 run and puts the 4th to a person (rejecting it runs nothing)."""
    agent = Approvals(ApprovalService.from_config(COUNTED, store=store, clock=clock))
    ran: list[str] = []

    @agent.guard(session="s-burst")
    def look_up_order(order_id: str) -> str:
        ran.append(order_id)
        return "shipped"

    for _ in range(3):
        assert await look_up_order("V1") == "shipped"
    fourth = asyncio.create_task(look_up_order("V1"))
    aid = await asked_a_person(store, fourth)
    asked = await store.approvals.get(aid)
    assert (asked.tool, asked.args, asked.rule) == ("look_up_order", {"order_id": "V1"}, "look_up_burst")
    assert ran == ["V1"] * 3
    await service(store, clock).decide(DecideRequest(aid, "U_SUPPORT1", DecisionKind.REJECT, reason="enough"))
    with pytest.raises(ActionRejected, match="enough"):
        await asyncio.wait_for(fourth, 5)
    assert ran == ["V1"] * 3


async def test_ten_parallel_asks_run_exactly_as_many_as_velocity_allows(store: Store, clock: FakeClock) -> None:
    """Ten asks at once, each its own call (distinct call ids): the count is taken atomically, so exactly 3 run and
    7 wait for a person."""
    agent = Approvals(ApprovalService.from_config(COUNTED, store=store, clock=clock))
    asks = [
        asyncio.create_task(agent.ask("look_up_order", {"order_id": "V2"}, session="s-many", call_id=f"c{i}"))
        for i in range(10)
    ]

    async def seven() -> list[str] | None:
        ids = [a.id for a in (await store.approvals.list_pending()).items]
        return ids if len(ids) == 7 else None

    pending = await eventually(seven, what="7 pending approvals", interval=0.005)
    reviewer = service(store, clock)
    for aid in pending:
        assert (await store.approvals.get(aid)).rule == "look_up_burst"
        await reviewer.decide(DecideRequest(aid, "U_SUPPORT2", DecisionKind.REJECT, reason="too many"))
    answers = await asyncio.wait_for(asyncio.gather(*asks), 10)
    assert sorted(a.status for a in answers) == ["approved"] * 3 + ["rejected"] * 7
    assert all(a.approval is None for a in answers if a.approved)  # the 3 ran without a person


async def test_a_rolling_sum_counts_each_unnamed_call_that_runs(store: Store, clock: FakeClock) -> None:
    """Threshold 100: a top-up of 60 runs; the same 60 again (no call id, so another call) makes 120 and needs a
    person."""
    agent = Approvals(ApprovalService.from_config(COUNTED, store=store, clock=clock))
    first = await agent.ask("top_up", {"customer_id": "C-1", "amount": 60}, session="s-sum")
    assert first.approved and first.approval is None
    second = asyncio.create_task(agent.ask("top_up", {"customer_id": "C-1", "amount": 60}, session="s-sum"))
    aid = await asked_a_person(store, second)
    assert (await store.approvals.get(aid)).rule == "top_up_sum"
    await service(store, clock).decide(DecideRequest(aid, "U_SUPPORT1", DecisionKind.REJECT, reason="over 100"))
    answer = await asyncio.wait_for(second, 5)
    assert answer.status == "rejected" and answer.reason == "over 100"
