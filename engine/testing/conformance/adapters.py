"""The adapter conformance suite: every framework adapter keeps every guarantee.

An adapter is tested through its framework for real: a scripted model makes the tool calls, real tools write to a
SQLite ledger file, and reviewers decide through the approval service (the path every surface shares). Subclass
:class:`AdapterConformance`, provide a ``world`` fixture (:class:`AgentWorld`) and implement :meth:`harness`::

    class TestMyAdapter(AdapterConformance):
        def harness(self, world: AgentWorld) -> AgentHarness:
            return MyHarness(world)

A harness drives one agent: :meth:`AgentHarness.start` runs the agent until it waits for a person (or finishes),
:meth:`AgentHarness.finish` lets it finish after the decisions (awaiting an inline wait, or resuming an interrupted
run from stored state), and :meth:`AgentHarness.restart` is a new process taking over (new objects, a new store
connection). What the agent runs in (the policy, the ledger, the harness protocol) is :mod:`.agent_world`. This
module imports pytest; ``hitl.testing`` itself does not.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import json
from typing import Any

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, InvalidInput
from hitl.engine.testing.conformance.agent_world import (
    ADAPTER_CONFIG,
    AgentHarness,
    AgentRun,
    AgentWorld,
    BreakableStore,
    ScriptedCall,
    Transcript,
    refund,
)

__all__ = ["PRACTICE_CONFIG", "AdapterConformance"]


class AdapterConformance(abc.ABC):
    """The cases every adapter passes on every store, numbered 1 to 17 below (11 is checked with 2)."""

    @abc.abstractmethod
    def harness(self, world: AgentWorld) -> AgentHarness:
        """A harness driving your adapter's agent in ``world``."""

    # -- helpers ------------------------------------------------------------------------------------------
    async def pending(self, world: AgentWorld, session: str, *, at_least: int = 1) -> list[Approval]:
        """The session's pending approvals once there are ``at_least`` (the agent creates them as it runs)."""
        store = world.store()
        for _ in range(1000):
            page = await store.approvals.list_pending(limit=200)
            found = [a for a in page.items if a.session_id == session]
            if len(found) >= at_least:
                return found
            await asyncio.sleep(0.01)
        raise AssertionError(f"no pending approval for session {session}")

    async def decide(
        self, world: AgentWorld, approval_id: str, reviewer: str, kind: DecisionKind, **kw: Any
    ) -> Approval:
        """Decide ``approval_id`` as ``reviewer`` would in Slack (roles from the suite's configuration)."""
        return await world.service(world.store()).decide(
            DecideRequest(approval_id, reviewer, kind, via="conformance", **kw)
        )

    async def none_pending(self, world: AgentWorld, session: str) -> bool:
        """True when nothing of the session waits for a person."""
        page = await world.store().approvals.list_pending(limit=200)
        return not [a for a in page.items if a.session_id == session]

    async def finish(self, h: AgentHarness, run: AgentRun) -> Transcript:
        """The run's transcript once the agent finished (30 s at most)."""
        return await asyncio.wait_for(h.finish(run), 30)

    # -- 1 ------------------------------------------------------------------------------------------------
    async def test_allowed_runs_and_denied_never_runs(self, world: AgentWorld) -> None:
        h = self.harness(world)
        calls = [
            ScriptedCall("c1", "look_up_order", {"order_id": "A1"}),
            ScriptedCall("c2", "wipe_database", {"confirm": True}),
        ]
        run = await h.start(calls, session="s-allow")
        seen = await self.finish(h, run)
        assert world.ledger.rows() == [("look_up_order", "A1", None)]
        assert "shipped" in seen.results["c1"]
        assert "denied" in seen.results["c2"].lower()
        assert await self.none_pending(world, "s-allow")

    # -- 2 and 11 -----------------------------------------------------------------------------------------
    async def test_approve_runs_once_with_the_approved_arguments(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A2", 120)], session="s-approve")
        (a,) = await self.pending(world, "s-approve")
        # keyed by the real tool name and arguments, bound to the framework's call, with the tool's schema
        assert (a.tool, a.args, a.tier) == ("refund", {"order_id": "A2", "amount": 120}, Tier.APPROVE)
        assert a.metadata["framework"] == h.framework and a.metadata.get("call_id")
        assert a.args_schema is not None and "amount" in a.args_schema.get("properties", {})
        assert world.ledger.rows() == []
        await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        seen = await self.finish(h, run)
        assert world.ledger.rows() == [("refund", "A2", 120.0)]
        assert "refunded 120" in seen.results["c1"]
        assert (await world.store().approvals.get(a.id)).status is Status.EXECUTED

    # -- 3 ------------------------------------------------------------------------------------------------
    async def test_reject_reason_reaches_the_model(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A3", 80)], session="s-reject")
        (a,) = await self.pending(world, "s-reject")
        await self.decide(world, a.id, "U_S2", DecisionKind.REJECT, reason="customer was refunded by phone")
        seen = await self.finish(h, run)
        assert world.ledger.rows() == []
        assert "customer was refunded by phone" in seen.results["c1"]

    # -- 4 ------------------------------------------------------------------------------------------------
    async def test_modify_runs_the_edited_validated_arguments(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A4", 120)], session="s-modify")
        (a,) = await self.pending(world, "s-modify")
        if not h.modifies:
            assert not a.modifiable
            with pytest.raises(InvalidInput, match="cannot be modified"):
                await self.decide(world, a.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "A4", "amount": 60})
            await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
            await self.finish(h, run)
            assert world.ledger.rows() == [("refund", "A4", 120.0)]
            return
        with pytest.raises(InvalidInput):  # validated against the schema snapshot the reviewer saw
            await self.decide(world, a.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "A4", "amount": "lots"})
        await self.decide(world, a.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "A4", "amount": 60})
        seen = await self.finish(h, run)
        assert world.ledger.rows() == [("refund", "A4", 60.0)]
        assert "refunded 60" in seen.results["c1"]

    # -- 5 ------------------------------------------------------------------------------------------------
    async def test_modify_that_raises_the_tier_is_asked_again(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A5", 120)], session="s-raise")
        (a,) = await self.pending(world, "s-raise")
        if not h.modifies:  # no Modify at all: the edit is refused, and nothing runs until someone decides
            with pytest.raises(InvalidInput, match="cannot be modified"):
                await self.decide(world, a.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "A5", "amount": 900})
            await self.decide(world, a.id, "U_S1", DecisionKind.REJECT, reason="ask for 900 instead")
            await self.finish(h, run)
            assert world.ledger.rows() == []
            return
        after = await self.decide(world, a.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "A5", "amount": 900})
        assert after.status is Status.SUPERSEDED and after.superseded_by
        again = await world.store().approvals.get(after.superseded_by)
        assert (again.tier, again.required_role, again.quorum) == (Tier.ESCALATE, "finance", 2)
        with pytest.raises(DecisionRefused):
            await self.decide(world, again.id, "U_S1", DecisionKind.APPROVE)
        await self.decide(world, again.id, "U_F1", DecisionKind.APPROVE)
        assert world.ledger.rows() == []
        await self.decide(world, again.id, "U_F2", DecisionKind.APPROVE)
        await self.finish(h, run)
        assert world.ledger.rows() == [("refund", "A5", 900.0)]

    # -- 6 ------------------------------------------------------------------------------------------------
    async def test_trust_runs_this_and_later_calls_of_the_session(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A6", 10)], session="s-trust")
        (a,) = await self.pending(world, "s-trust")
        await self.decide(world, a.id, "U_S1", DecisionKind.TRUST)
        await self.finish(h, run)
        later = await h.start([refund("c2", "B6", 20)], session="s-trust")
        await self.finish(h, later)
        assert world.ledger.rows() == [("refund", "A6", 10.0), ("refund", "B6", 20.0)]
        other = await h.start([refund("c3", "C6", 30)], session="s-other")
        (asked,) = await self.pending(world, "s-other")
        await self.decide(world, asked.id, "U_S2", DecisionKind.REJECT, reason="not trusted here")
        await self.finish(h, other)
        assert len(world.ledger.rows()) == 2

    # -- 7 ------------------------------------------------------------------------------------------------
    async def test_an_identical_call_after_execution_needs_a_new_approval(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A7", 40)], session="s-twice")
        (a,) = await self.pending(world, "s-twice")
        await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        await self.finish(h, run)
        again = await h.start([refund("c2", "A7", 40)], session="s-twice")
        (b,) = await self.pending(world, "s-twice")
        assert b.id != a.id and b.args == a.args
        await self.decide(world, b.id, "U_S1", DecisionKind.REJECT, reason="already refunded")
        seen = await self.finish(h, again)
        assert world.ledger.rows() == [("refund", "A7", 40.0)]
        assert "already refunded" in seen.results["c2"]

    # -- 8 ------------------------------------------------------------------------------------------------
    async def test_a_new_process_reattaches_and_runs_once(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A8", 55)], session="s-crash")
        (a,) = await self.pending(world, "s-crash")
        await h.crash(run)
        await self.decide(world, a.id, "U_S2", DecisionKind.APPROVE)
        taken_over = await h.restart(run)
        await self.finish(h, taken_over)
        assert world.ledger.rows() == [("refund", "A8", 55.0)]
        assert (await world.store().approvals.get(a.id)).status is Status.EXECUTED
        assert await self.none_pending(world, "s-crash")

    # -- 9 ------------------------------------------------------------------------------------------------
    async def test_an_expired_wait_closes_the_approval(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A9", 70)], session="s-expire")
        (a,) = await self.pending(world, "s-expire")
        world.clock.advance(a.expires_at - world.clock.now() + 1)
        expired = await world.service(world.store()).expire_due()  # what `hitl serve` does on its tick
        assert [e.id for e in expired] == [a.id]
        seen = await self.finish(h, run)
        assert world.ledger.rows() == []
        assert "expired" in seen.results["c1"]
        with pytest.raises(DecisionRefused) as late:
            await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        assert late.value.code in (ErrorCode.ALREADY_DECIDED, ErrorCode.EXPIRED)
        assert (await world.store().approvals.get(a.id)).status is Status.EXPIRED

    # -- 10 -----------------------------------------------------------------------------------------------
    async def test_quorum_two_runs_only_after_two_eligible_reviewers(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A10", 899)], session="s-quorum")
        (a,) = await self.pending(world, "s-quorum")
        assert (a.tier, a.required_role, a.quorum) == (Tier.ESCALATE, "finance", 2)
        with pytest.raises(DecisionRefused) as support:
            await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        assert support.value.code is ErrorCode.NOT_ELIGIBLE
        await self.decide(world, a.id, "U_F1", DecisionKind.APPROVE)
        with pytest.raises(DecisionRefused):
            await self.decide(world, a.id, "U_F1", DecisionKind.APPROVE)
        assert world.ledger.rows() == []
        await self.decide(world, a.id, "U_F3", DecisionKind.APPROVE)
        await self.finish(h, run)
        assert world.ledger.rows() == [("refund", "A10", 899.0)]

    # -- 12 -----------------------------------------------------------------------------------------------
    async def test_a_store_failure_during_the_wait_fails_closed(self, world: AgentWorld) -> None:
        h = self.harness(world)
        run = await h.start([refund("c1", "A12", 65)], session="s-broken")
        (a,) = await self.pending(world, "s-broken")
        assert isinstance(run.store, BreakableStore)
        run.store.break_()  # the agent's store stops answering while it waits
        await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        try:
            seen = await self.finish(h, run)
        except EngineError:
            seen = None  # refusing to go on is closed too
        assert world.ledger.rows() == []
        if seen is not None:
            assert "did not run" in seen.results.get("c1", "did not run")

    # -- 13 -----------------------------------------------------------------------------------------------
    async def test_concurrent_identical_calls_share_one_approval_and_run_once(self, world: AgentWorld) -> None:
        """Three agent processes make the same call at once (a duplicated worker, a replayed task): one approval,
        one Approve, and the effect runs exactly once; every process hears either its result or that another
        caller was handed it."""
        hs = [self.harness(world) for _ in range(3)]  # three processes on one session
        first = await hs[0].start([refund("c1", "A13", 75)], session="s-many")
        runs = [first, *[await h.restart(first) for h in hs[1:]]]
        (a,) = await self.pending(world, "s-many")
        await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        finishing = (h.finish_shared(r) for h, r in zip(hs, runs, strict=True))
        seen = await asyncio.wait_for(asyncio.gather(*finishing, return_exceptions=True), 30)
        assert world.ledger.rows() == [("refund", "A13", 75.0)]
        told = []
        for outcome in seen:
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, EngineError) and outcome.code is ErrorCode.HANDED_ELSEWHERE, outcome
            elif outcome is not None:  # None: another process continued this session's run
                told.append(outcome.results.get("c1", ""))
        assert any("refunded 75" in t for t in told), seen
        assert all("refunded 75" in t or a.id in t for t in told), told
        assert (await world.store().approvals.get(a.id)).status is Status.EXECUTED

    # -- 14 -----------------------------------------------------------------------------------------------
    async def test_a_halt_stops_every_call_it_covers_until_it_is_lifted(self, world: AgentWorld) -> None:
        """The stop switch (``hitl halt``): while every tool is halted, neither an allowed call nor a gated one runs
        or asks anyone, and the model hears who halted it and why; once lifted, calls go on."""
        switch = world.service(world.store()).switch
        await switch.halt(None, by="U_ADMIN", reason="incident 7")
        h = self.harness(world)
        calls = [ScriptedCall("c1", "look_up_order", {"order_id": "H1"}), refund("c2", "H1", 40)]
        seen = await self.finish(h, await h.start(calls, session="s-halt"))
        assert world.ledger.rows() == []
        assert await self.none_pending(world, "s-halt")
        assert all("incident 7" in seen.results[c] for c in ("c1", "c2")), seen.results
        await switch.lift(None, by="U_ADMIN")
        again = self.harness(world)  # a new agent process: it reads the switch afresh
        await self.finish(
            again, await again.start([ScriptedCall("c3", "look_up_order", {"order_id": "H2"})], session="s-go")
        )
        assert world.ledger.rows() == [("look_up_order", "H2", None)]

    # -- 15 -----------------------------------------------------------------------------------------------
    async def test_a_practice_twin_never_reaches_or_runs_in_the_agent(self, world: AgentWorld) -> None:
        """Practice approvals: the agent's approval gets a practice twin (a planted defect, a session of its own) that
        reviewers decide like any other; approving it runs nothing, and the agent goes on with its own approval."""
        world.config = parse_config(ADAPTER_CONFIG + PRACTICE_CONFIG)
        h = self.harness(world)
        run = await h.start([refund("c1", "P1", 30)], session="s-practice")
        (a,) = await self.pending(world, "s-practice")
        page = await world.store().approvals.list_pending(limit=200)
        (twin,) = [x for x in page.items if x.metadata.get("of") == a.id]
        assert twin.session_id != a.session_id and twin.args["amount"] == 9999
        await self.decide(world, twin.id, "U_S1", DecisionKind.APPROVE)  # the defect missed: still, nothing runs
        assert world.ledger.rows() == []
        await self.decide(world, a.id, "U_S2", DecisionKind.APPROVE)
        seen = await self.finish(h, run)
        assert world.ledger.rows() == [("refund", "P1", 30.0)] and "refunded 30" in seen.results["c1"]

    # -- 16 -----------------------------------------------------------------------------------------------
    async def test_a_tool_the_framework_runs_reads_its_receipt_while_it_runs(self, world: AgentWorld) -> None:
        """Receipts: an approved call's receipt (issued with its execution claim) is ``hitl.current_receipt()``
        inside the tool the framework runs; an allowed call of a tool without ``always`` has none."""
        world.config = parse_config(ADAPTER_CONFIG + RECEIPTS_CONFIG)
        world.signer = UnsignedReceipts()
        h = self.harness(world)
        run = await h.start(
            [refund("c1", "R1", 40), ScriptedCall("c2", "look_up_order", {"order_id": "R1"})], session="s-receipt"
        )
        (a,) = await self.pending(world, "s-receipt")
        await self.decide(world, a.id, "U_S1", DecisionKind.APPROVE)
        await self.finish(h, run)
        (receipt,) = world.ledger.receipts("refund")
        assert receipt is not None
        claims = UnsignedReceipts.claims_of(receipt)
        assert (claims["sub"], claims["tool"], claims["basis"]) == (a.id, "refund", "approval")
        assert await world.store().receipts.issued(claims["jti"]) is not None  # recorded by the claim
        assert world.ledger.receipts("look_up_order") == [None]

    # -- 17 -----------------------------------------------------------------------------------------------
    async def test_velocity_counts_every_allowed_call_the_framework_runs(self, world: AgentWorld) -> None:
        """Counting: the model looks the same order up four times in one turn (distinct call ids; a framework that
        runs tool calls at once asks for all four together). ``look_up_burst`` allows 3 an hour: exactly 3 run
        without a person, the 4th waits for one, and rejected it never runs while the run finishes."""
        h = self.harness(world)
        calls = [ScriptedCall(f"c{i}", "look_up_order", {"order_id": "V17"}) for i in range(1, 5)]
        run = await h.start(calls, session="s-velocity")
        (a,) = await self.pending(world, "s-velocity")
        assert (a.tool, a.args, a.rule) == ("look_up_order", {"order_id": "V17"}, "look_up_burst")
        assert a.metadata.get("call_id") in {c.call_id for c in calls}
        assert len(world.ledger.rows()) <= 3
        await self.decide(world, a.id, "U_S1", DecisionKind.REJECT, reason="three look-ups are enough")
        seen = await self.finish(h, run)
        assert world.ledger.rows() == [("look_up_order", "V17", None)] * 3
        assert "three look-ups are enough" in seen.results[a.metadata["call_id"]]
        assert sum("shipped" in seen.results[c.call_id] for c in calls) == 3, seen.results
        assert await self.none_pending(world, "s-velocity")

    # -- 18 -----------------------------------------------------------------------------------------------
    async def test_an_allowed_call_of_a_tool_receipted_always_reads_its_receipt(self, world: AgentWorld) -> None:
        """Receipts ``always``: a call the policy lets run without a person still runs with its receipt (basis
        ``policy``) as ``hitl.current_receipt()``, on every adapter's shortest path for allowed calls too."""
        world.config = parse_config(ADAPTER_CONFIG + RECEIPTS_CONFIG + ALWAYS_CONFIG)
        world.signer = UnsignedReceipts()
        h = self.harness(world)
        run = await h.start([ScriptedCall("c1", "look_up_order", {"order_id": "A18"})], session="s-always")
        await self.finish(h, run)
        (receipt,) = world.ledger.receipts("look_up_order")
        assert receipt is not None, "an allowed call of a tool receipted always ran without its receipt"
        claims = UnsignedReceipts.claims_of(receipt)
        assert (claims["tool"], claims["basis"]) == ("look_up_order", "policy")
        assert await world.store().receipts.issued(claims["jti"]) is not None


RECEIPTS_CONFIG = """
receipts:
  issuer: https://hitl.example.com
"""
"""Case 16's receipts (signed by :class:`UnsignedReceipts`, as ``hitl serve`` would with its key)."""

ALWAYS_CONFIG = """  tools:
    look_up_order: {always: true}
"""
"""Case 18: look-ups, which the policy lets run without a person, get a receipt each all the same."""


class UnsignedReceipts:
    """A stand-in for ``hitl serve``'s key in case 16: the claims, readable, with no signature (what is checked is
    that the receipt reaches the tool, not the JOSE library, which hitl's receipt tests check)."""

    def sign(self, claims: Any) -> str:
        """``claims`` as three dot-separated parts, the last empty."""
        body = base64.urlsafe_b64encode(json.dumps(dict(claims)).encode()).decode().rstrip("=")
        return f"e30.{body}."

    @staticmethod
    def claims_of(receipt: str) -> dict[str, Any]:
        """The claims of a receipt it made."""
        body = receipt.split(".")[1]
        return dict(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


PRACTICE_CONFIG = """
oversight:
  practice:
    delay: 0
    tools: {refund: 1.0}
    defects:
      refund:
        - {name: amount_off, set: {amount: 9999}, says: "the amount is far above the order's total"}
"""
"""The practice twins of case 15: every refund approval gets one, its amount planted at 9999, its card posted at
once (``delay: 0``: a test looks at it right away)."""
