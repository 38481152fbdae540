"""What every step handler shares: the run's services, template scope, proposals, gated effects, checkpoints."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Status, Tier
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.runs import RunState, RunStatus, StoredRun
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.execution.drift import DriftCheck
from hitl.engine.execution.effects import EffectInDoubt, Effects, Resolution
from hitl.engine.execution.leases import kept_alive
from hitl.engine.execution.run_lease import RunLease
from hitl.engine.execution.tools import Tool
from hitl.engine.process.workers import worker_name
from hitl.engine.runner.outcomes import Stop, goes_on, stop_for
from hitl.engine.runner.templates import render_value
from hitl.engine.service import ApprovalService, Proposal
from hitl.engine.workflow.definition import ToolStep

__all__ = ["DOUBT", "Ask", "StepContext"]

log = logging.getLogger(__name__)

DOUBT = "doubt:"
"""Prefix of the tool name of an approval that asks a person about an effect in doubt."""


@dataclass(frozen=True)
class Ask:
    """What a step asks reviewers about one action: where it comes from and how strictly it is gated.

    Args:
        step_id: the step (its approvals record it; a resume finds them by it).
        evidence: untrusted text shown beside the action (already rendered; never rendered again).
        required: a person decides whatever the policy's tier.
        timeout: how long the approval stays open (None: the policy's).
        key: one call among several in the step (an agent's tool call), so each has its own approval.
    """

    step_id: str
    evidence: str
    required: bool
    timeout: float | None
    key: str | None = None


class StepContext:
    """The toolkit a step handler works with. One per runner; a run's state lives in its :class:`RunLease`.

    Args:
        service: policy + store + reviewers of the run's context.
        worker_id: names this process as run owner, claim holder and in the audit log (unique per process).
        lease: seconds a run's ownership and an effect's claim stay valid unrenewed. The owner renews both every
            third of that while it works, so a worker that dies is taken over within one lease.
    """

    def __init__(self, service: ApprovalService, *, worker_id: str | None = None, lease: float = 6.0) -> None:
        self.svc = service
        self.store = service.store
        self.worker_id = worker_id or worker_name("runner")
        self.lease = lease
        self.effects = Effects(
            service.store,
            service.clock,
            self.worker_id,
            lease,
            switch=service.switch,
            receipts=service.receipts,
            drift=DriftCheck(service, self.worker_id),
        )
        self.run_leases: dict[str, RunLease] = {}
        """The runs this runner run_leases now, by session id."""

    # -- templates ----------------------------------------------------------------------------------------
    def scope(self, state: RunState, step_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "vars": state.vars,
            "steps": {k: {"output": v, "response": state.responses.get(k)} for k, v in state.outputs.items()},
            "feedback": state.feedback.get(step_id, ""),
            "iteration": state.iteration.get(step_id, 0),
            **extra,
        }

    def args(self, tool: Tool, state: RunState, step: ToolStep, **extra: Any) -> dict[str, Any]:
        rendered = render_value(step.args, self.scope(state, step.id, **extra), where=f"steps.{step.id}.args")
        return tool.schema.validate(rendered)

    # -- approvals ----------------------------------------------------------------------------------------
    async def waiting(self, state: RunState, *, step_id: str, tool: str, key: str | None = None) -> Approval | None:
        """The approval the checkpoint says this step waits on, if any (followed through modifications).

        A resumed step reads its approval from the checkpoint instead of proposing again, so a resume never
        re-evaluates the policy or re-counts rolling windows. It is consumed here: a later iteration of the same
        step proposes its own approval.
        """
        wanted = state.waits.get(step_id)
        if wanted is None and state.waiting not in state.waits.values():
            wanted = state.waiting  # a run that waits on one step (a chain): its approval; else another step's
        if wanted is None:
            return None
        run_lease = self.run_lease(state)
        if run_lease.waiting is not None and run_lease.waiting.id == wanted:
            found, run_lease.waiting = run_lease.waiting, None  # read with the checkpoint when the run was opened
        else:
            found = await self.store.approvals.get(wanted)
        it = state.iteration.get(step_id, 0)
        if found.metadata.get("step") != step_id or found.tool != tool or found.metadata.get("iteration", it) != it:
            return None
        if key is not None and found.metadata.get("key") != key:
            return None
        state.waits.pop(step_id, None)
        if state.waiting == wanted:
            state.waiting = None
        return await self.effects.follow(found)

    def ask_for(self, state: RunState, step: ToolStep) -> Ask:
        """What a tool step asks reviewers about (its evidence rendered now)."""
        evidence = str(render_value(step.evidence, self.scope(state, step.id), where=f"steps.{step.id}.evidence"))
        return Ask(step.id, evidence, step.approval == "required", step.timeout)

    async def propose(self, state: RunState, ask: Ask, tool: str, args: dict[str, Any], **kw: Any) -> Proposal:
        it = state.iteration.get(ask.step_id, 0)
        scope = f"{state.session_id}:{ask.step_id}:{it}" + (f":{ask.key}" if ask.key else "")
        extra = {"key": ask.key} if ask.key else {}
        return await self.svc.propose(
            ProposeRequest(
                tool,
                args,
                session_id=state.session_id,
                requester=state.requester,
                on_behalf_of=state.on_behalf_of,
                evidence=ask.evidence,
                preview=json.dumps(args, ensure_ascii=False, indent=1)[:2000] if not kw.get("batch") else "",
                min_tier=Tier.APPROVE if ask.required else Tier.AUTO,
                dedupe_scope=scope,
                metadata=self._about(state, ask.step_id, "tool", **extra),
                timeout=ask.timeout,
                trusted=self.run_lease(state).trusted,
                create=False,
                named=True,
                **kw,
            )
        )

    async def standing(
        self, state: RunState, ask: Ask, tool: str, args: dict[str, Any], **kw: Any
    ) -> Approval | Stop | None:
        """What the step may do now: halt (denied, pending, rejected...), go with an approval, or go."""
        waited = await self.waiting(state, step_id=ask.step_id, tool=tool, key=ask.key)
        if waited is not None:
            return stop_for(waited) or waited
        prop = await self.propose(state, ask, tool, args, **kw)
        if prop.verdict.denied:
            return Stop(RunStatus.REJECTED, reason=f"{tool} is denied by policy; nothing ran")
        if prop.approval is None:
            return None
        known = self.run_lease(state).answered.pop(prop.approval.id, None)
        if known is not None:  # asked and answered before: go on with the answer
            approval = await self.effects.follow(known)
            return stop_for(approval) or approval
        return self._pause_on(state, await self.svc.consequence_of(prop.approval))  # asked now: what it will do

    def _pause_on(self, state: RunState, approval: Approval) -> Stop:
        """Pause on an approval proposed but not stored: the pause stores it with the checkpoint, in one step."""
        self.run_lease(state).asks[approval.id] = approval
        return Stop(RunStatus.PAUSED, approval=approval)

    async def gated(self, tool: Tool, state: RunState, step: ToolStep, args: dict[str, Any], *, key: str) -> Any:
        """Run ``tool`` once it may run (with the approved, possibly modified, arguments), or halt."""
        # The tool's schema is snapshotted on its approval: reviewers edit against exactly it.
        verdict = await self.standing(state, self.ask_for(state, step), tool.name, args, schema=tool.schema.json)
        if isinstance(verdict, Stop):
            return verdict
        return await self.effect(
            state, step.id, tool, verdict.execute_args if verdict else args, key=key, approval=verdict
        )

    async def effect(
        self,
        state: RunState,
        step_id: str,
        tool: Tool,
        args: dict[str, Any],
        *,
        key: str,
        approval: Approval | None,
        item_of: tuple[Approval, int] | None = None,
    ) -> Any:
        """Run the effect exactly once; when a crash left it in doubt, pause on a person's answer and apply it.
        ``item_of``: a batch's item (the batch's approval and the item's index)."""
        resolution: Resolution | None = None
        doubt = await self.waiting(state, step_id=step_id, tool=DOUBT + tool.name, key=key)
        if doubt is not None:
            if (
                doubt.status is Status.REJECTED
                and doubt.decisions
                and doubt.decisions[-1].kind is DecisionKind.FEEDBACK
            ):
                resolution = "done"  # "Mark done": the reviewer checked, it happened
            elif goes_on(doubt):
                resolution = "rerun"  # "Run again": it did not happen
                await self._closed(doubt)  # answered: closed, so retention removes it with its run
            else:
                return stop_for(doubt) or Stop(RunStatus.REJECTED, approval=doubt, reason=doubt.reason or "stopped")
        try:
            return await self.effects.execute(
                tool,
                args,
                key=key,
                approval=approval,
                resolution=resolution,
                run_lease=self.run_lease(state),
                item_of=item_of,
            )
        except EffectInDoubt as exc:
            return Stop(RunStatus.PAUSED, approval=await self._ask_about(state, step_id, tool, args, exc, approval))
        except EngineError as exc:
            if exc.code is not ErrorCode.CONSEQUENCE_DRIFTED or approval is None:
                raise
            # Nothing ran: the run waits on the approval that asks again (or ends with the one expired as drifted).
            now = await self.effects.follow(await self.store.approvals.get(approval.id))
            return stop_for(now) or Stop(RunStatus.REJECTED, approval=now, reason=exc.message)

    async def _ask_about(
        self,
        state: RunState,
        step_id: str,
        tool: Tool,
        args: dict[str, Any],
        exc: EffectInDoubt,
        approval: Approval | None,
    ) -> Approval:
        name = DOUBT + tool.name
        question = {"tool": tool.name, "args": args, "idempotency_key": exc.key}
        preview = (
            f"The worker running {tool.name} stopped before recording whether it happened. Check the system it acts "
            "on, then: Mark done (it happened), Run again (it did not), or Stop the run."
        )
        prop = await self.svc.propose(
            self._question(
                state,
                name,
                question,
                preview,
                dedupe_key=f"{state.session_id}:{name}:{exc.key}:{exc.attempt}",
                metadata=self._about(
                    state, step_id, "doubt", key=exc.key, approval_id=approval.id if approval else None
                ),
                role=approval.required_role if approval else None,
                kind=ApprovalKind.DOUBT,
            )
        )
        if prop.approval is None:
            raise EngineError(f"{name}: the policy denies asking about it; allow {name}", code=ErrorCode.POLICY_DENIED)
        return prop.approval

    async def review(
        self,
        state: RunState,
        tool: str,
        step_id: str,
        prompt: str,
        preview: str,
        *,
        kind: ApprovalKind,
        role: str | None,
        timeout: float | None,
        fallback: str,
    ) -> Approval:
        """The approval of a review (a gate, or a quality loop's check): from the checkpoint, or proposed now. An
        approved review is closed as it is read (approved -> executed: the step goes on), so it reaches a final state
        and retention removes it with its run; callers read "go on" with :func:`~.outcomes.goes_on`."""
        waited = await self.waiting(state, step_id=step_id, tool=tool)
        if waited is not None:
            return await self._closed(waited)
        it = state.iteration.get(step_id, 0)
        # Redacted before anything is stored: the gate's arguments are what cards, `hitl show` and the audit show.
        redact = self.svc.redactor.redact
        args = {"prompt": redact(prompt), "preview": redact(preview)}
        preview = args["preview"]
        prop = await self.svc.propose(
            self._question(
                state,
                tool,
                args,
                preview,
                dedupe_scope=f"{state.session_id}:{tool}:{it}",
                metadata=self._about(state, step_id, "gate", fallback=fallback),
                kind=kind,
                timeout=timeout,
                role=role,
                create=False,
                named=True,
            )
        )
        if prop.approval is None:
            raise EngineError(
                f"{tool}: the policy denies review gates here; allow it or remove the gate",
                code=ErrorCode.POLICY_DENIED,
            )
        run_lease = self.run_lease(state)
        known = run_lease.answered.pop(prop.approval.id, None)
        if known is not None:  # asked and answered before
            return await self._closed(known)
        run_lease.asks[prop.approval.id] = prop.approval  # pending: the gate pauses, and the pause stores it
        return prop.approval

    async def _closed(self, review: Approval) -> Approval:
        """An approved review, closed (approved -> executed): its step goes on, and it reaches a final state."""
        if review.status is not Status.APPROVED:
            return review
        return await self.effects.mark(await self.effects.mark(review, Status.EXECUTING), Status.EXECUTED)

    @staticmethod
    def _question(state: RunState, tool: str, args: dict[str, Any], preview: str, **kw: Any) -> ProposeRequest:
        """A question the run itself puts to a person (a review, a doubt about an effect): asked in the run's session
        as its requester, with ``preview`` on the card, at tier approve at least (a person always answers it)."""
        return ProposeRequest(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            preview=preview,
            min_tier=Tier.APPROVE,
            **kw,
        )

    @staticmethod
    def _about(state: RunState, step_id: str, kind: str, **extra: Any) -> dict[str, Any]:
        """What an approval records about the run step that asked for it (``waiting`` matches on it)."""
        it = state.iteration.get(step_id, 0)
        return {"step": step_id, "iteration": it, "workflow": state.workflow, "kind": kind, **extra}

    async def park(self, state: RunState, step_id: str, halt: Stop) -> bool:
        """A step running beside others pauses: store its approval now (so it can be decided while the others
        work) and note that the step waits on it. False when that approval was asked and answered before: the
        step runs again and goes on with the answer."""
        run_lease = self.run_lease(state)
        approval = halt.approval
        if approval is None:
            return True
        ask = run_lease.asks.pop(approval.id, None)
        if ask is not None:
            done = await run_lease.commit(ask=ask)
            if not done.applied:
                assert done.approval is not None
                run_lease.answered[done.approval.id] = done.approval
                return False
            if done.approval is not None:
                approval = done.approval
                if done.created:
                    await self.svc.announce(approval)
        state.waits[step_id] = approval.id
        await self.save(state)
        return True

    def event(self, state: RunState, event: str, detail: str) -> None:
        """Run-level events join the audit trail (the chain of entries that belong to no approval), written with
        the run's next commit."""
        self.run_lease(state).events.append(
            AuditEntry(
                at=self.svc.clock.now(),
                actor=self.worker_id,
                event=event,
                detail=f"{state.session_id}: {detail}"[:500],
            )
        )

    # -- ownership and persistence ------------------------------------------------------------------------
    def run_lease(self, state: RunState) -> RunLease:
        return self.run_leases[state.session_id]

    def begin(self, state: RunState) -> RunLease:
        """A new run: nothing is written until its first commit, which creates it and takes ownership."""
        return RunLease(self.store, self.svc.clock, self.worker_id, self.lease, state, dirty=True)

    async def open(self, session_id: str) -> RunLease:
        """An existing run taken over to resume it: ownership, checkpoint, waiting approval, trust, one read."""
        opened = await self.store.journal.open(
            session_id, holder=self.worker_id, now=self.svc.clock.now(), lease=self.lease
        )
        state = RunState.of(StoredRun(opened.data, opened.version))
        return RunLease(
            self.store,
            self.svc.clock,
            self.worker_id,
            self.lease,
            state,
            owned=True,
            waiting=opened.waiting,
            trusted=opened.trusted,
        )

    @contextlib.asynccontextmanager
    async def driving(self, run_lease: RunLease) -> AsyncIterator[RunLease]:
        """Drive the run under its lease, renewed every third of it; at the end write what still waits, let it go."""
        run_id = run_lease.state.session_id
        clock = self.svc.clock

        async def renew() -> bool:
            if not run_lease.owned:  # not taken yet (a start before its first commit) or already let go
                return True
            return await self.store.runs.renew(run_id, holder=self.worker_id, now=clock.now(), lease=self.lease)

        self.run_leases[run_id] = run_lease
        try:
            async with kept_alive(renew, every=self.lease / 3, what=f"ownership of run {run_id}"):
                yield run_lease
        finally:
            del self.run_leases[run_id]
            await self._let_go(run_lease)

    async def _let_go(self, run_lease: RunLease) -> None:
        """Normally the run's last commit let it go. After an error: keep what was done, then let it go."""
        try:
            if run_lease.pending and (run_lease.owned or run_lease.committed):
                await run_lease.commit(release=True)
            elif run_lease.owned:
                await self.store.runs.release(run_lease.state.session_id, holder=self.worker_id)
        except Exception:  # already failing: the run stays for recovery to take over when the lease runs out
            log.warning("could not write the last steps of run %s; recovery resumes it", run_lease.state.session_id)

    async def save(self, state: RunState) -> None:
        """The checkpoint changed: it is written with the run's next commit."""
        self.run_lease(state).dirty = True

    async def flush(self, state: RunState) -> None:
        """Write what waits now (before a write outside the run's commits must follow it)."""
        run_lease = self.run_lease(state)
        if run_lease.pending:
            await run_lease.commit()
