"""``hitl resume ID ID ... --approve | --reject``: one decision on several approvals, the engine's group decision
(:mod:`hitl.engine.deciding.groups`), each member bound to the version and hash read when the command starts and
decided under its own rules. Against the store the runs it ends go on here, as ``hitl resume ID`` continues one;
through the API (``HITL_API_URL``, ``HITL_TOKEN``) it is ``POST /api/v1/decisions`` and ``hitl serve`` continues
them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hitl.api.group_decision_models import GroupDecisionView
from hitl.api.models import ApprovalView
from hitl.cli.context import CliSettings
from hitl.cli.flows import LOCAL, approval_view, refuse_local_in_production, resolve_target
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import GroupDecideRequest, GroupMember

if TYPE_CHECKING:  # `hitl resume ID ID` through the API opens no runtime
    from hitl.engine.runtime.process import Runtime

__all__ = ["decide_group_locally", "group_exit_code"]


async def decide_group_locally(
    rt: Runtime, settings: CliSettings, targets: Sequence[str], kind: DecisionKind, *, reason: str | None
) -> GroupDecisionView:
    """Decide ``targets`` (approval ids, or session ids whose run waits on one) together against the store. Every
    check that refuses the whole command (an unknown id, ``production: true``, no reviewer) comes before anything is
    recorded; a member's own refusal is its outcome."""
    located = [await resolve_target(rt, t) for t in targets]
    for approval, state in located:
        await refuse_local_in_production(rt, approval, state=state)
    request = GroupDecideRequest(
        tuple(GroupMember(a.id, a.version, a.action_hash) for a, _ in located),
        settings.require_reviewer(),
        kind,
        reason=reason,
        via=LOCAL,
    )
    outcome = await rt.lifecycle.decide_group(request, seen={a.id: a for a, _ in located})
    ended = [m for m in outcome.members if m.approval is not None and m.recorded and not m.approval.is_open]
    runs = sum(1 for m in ended if m.approval is not None and m.approval.metadata.get("step"))
    if runs:  # their resumes were queued with the decisions: continue them here, as `hitl resume ID` does
        await rt.lifecycle.process_jobs(limit=runs)
    views: list[ApprovalView | None] = []
    for m in outcome.members:
        views.append(await approval_view(rt, m.approval) if m.approval is not None else None)
    return GroupDecisionView.of(outcome, request.digest, views)


def group_exit_code(view: GroupDecisionView) -> int:
    """1 when any member was refused (stale included: nothing was recorded on it), else 4 when any still waits for
    more approvers, else 3 for a rejection and 0 for an approval (the CLI's exit codes)."""
    if view.stale or view.refused:
        return 1
    if view.voted:
        return 4
    return 3 if view.decision == "reject" else 0
