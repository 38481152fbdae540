"""Calls that run without a person: the plan for a tool whose name alone lets it run (worked out once per policy),
and what a call the policy lets through with an FYI leaves behind before it runs (its audit entry, its FYI job)."""

from __future__ import annotations

from dataclasses import dataclass

from hitl.engine.domain.actions import TOOL_NAME, ProposedAction
from hitl.engine.domain.arg_schema import CompiledSchema, compile_schema
from hitl.engine.domain.models import RESERVED_PREFIXES, Tier
from hitl.engine.domain.policy import Policy, Verdict
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.spot_checks import SpotCheckSpec
from hitl.engine.ports import Store
from hitl.engine.subscribers.events import FYI_JOB

__all__ = ["AllowedPlan", "AllowedPlans", "declared_schema", "record_told"]

_MOST_PLANS = 1024
"""Tools planned at most: a caller inventing tool names cannot grow the plans without bound."""


@dataclass(frozen=True)
class AllowedPlan:
    """What a call of one tool that its name alone lets run needs, worked out once per policy: the verdict, and
    ``hitl.yaml``'s schema for the tool compiled (the call's arguments are still checked against it, and against the
    schema the caller sends, on every call)."""

    verdict: Verdict
    declared: CompiledSchema | None


class AllowedPlans:
    """The plans of the tools asked about, kept while the policy and the spot checks stay the same objects."""

    def __init__(self) -> None:
        self._plans: dict[str, AllowedPlan | None] = {}
        self._made_for: tuple[Policy, SpotCheckSpec] | None = None

    def plan(self, tool: str, policy: Policy, spot_check: SpotCheckSpec) -> AllowedPlan | None:
        """The plan for ``tool`` when its name alone lets it run with nothing recorded: the policy decides it by
        name (no rule, trust grant or step can change it), as ``auto``, and no spot check samples it. None
        otherwise, and then the policy decides."""
        made_for = self._made_for
        if made_for is None or made_for[0] is not policy or made_for[1] is not spot_check:
            self._plans, self._made_for = {}, (policy, spot_check)
        if tool in self._plans:
            return self._plans[tool]
        verdict = policy.static_verdict(tool)
        plan = None
        if (
            verdict is not None
            and not verdict.denied
            and verdict.tier is Tier.AUTO
            and not spot_check.rate_for(tool, str(verdict.tier))
            and TOOL_NAME.match(tool)
            and not tool.startswith(RESERVED_PREFIXES)
        ):
            plan = AllowedPlan(verdict, declared_schema(policy, tool))
        if len(self._plans) < _MOST_PLANS:
            self._plans[tool] = plan
        return plan


def declared_schema(policy: Policy, tool: str) -> CompiledSchema | None:
    """``hitl.yaml``'s argument schema for ``tool``, compiled (None when it declares none)."""
    declared = policy.spec.tools.get(tool)
    return compile_schema(tool, declared.schema_) if declared is not None and declared.schema_ is not None else None


async def record_told(
    store: Store, request: ProposeRequest, verdict: Verdict, action: ProposedAction, now: float
) -> None:
    """A notify call, and a call let through by a reviewer's Trust, is audited and its FYI queued (a durable job the
    bot posts at Slack's pace) before it runs, like any decision the policy makes for a person to see: if the store
    cannot take them, the call does not go ahead. Nothing for a call nobody is told of."""
    if not verdict.told:
        return
    reason = "; ".join(verdict.reasons)
    await store.audit.append(
        AuditEntry(
            at=now,
            actor=action.requester[:200],
            event="trusted" if verdict.trusted else "notified",
            action_hash=action.digest,
            outcome=str(verdict.tier),
            detail=f"{request.session_id}: {request.tool} ran with an FYI to reviewers ({reason})"[:500],
        )
    )
    fyi = {"tool": request.tool, "args": action.clean, "session_id": request.session_id, "reason": reason}
    await store.jobs.enqueue(FYI_JOB, fyi, now=now)
