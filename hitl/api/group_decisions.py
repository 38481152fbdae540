"""``POST /decisions``: one decision on several approvals, the engine's group decision
(:mod:`hitl.engine.deciding.groups`), as Slack's Approve all / Reject all makes it. Each member is decided as
``POST /approvals/{id}/decisions`` decides it (bound to its version and hash, same rules and audit, channel
``api:<token name>``); the answer says what happened to each, once every one is recorded or refused."""

from __future__ import annotations

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.group_outcome import GroupOutcome
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.practice import is_practice, practice_note
from hitl.engine.domain.requests import GroupDecideRequest, GroupMember
from hitl.engine.errors import NotFound

from .context import CONTEXT, ApiContext, TokenReviewers, body_of, caller_of, may_see
from .group_decision_models import GroupDecisionRequest, GroupDecisionView
from .models import ApprovalView
from .routes import Endpoint
from .tokens import Caller

__all__ = ["routes"]


async def decide_group(request: web.Request) -> web.Response:
    """Decide several approvals at once, each bound to the version and action hash you reviewed.

    The answer is 200 once every member is recorded or refused, with each member's outcome: ``decided``, ``voted``
    (a quorum still short), ``stale`` (it changed since you saw it) or ``refused`` with the code a single decision
    would get. A member whose approving takes typed values or a reason is refused in a group approval
    (``confirmation_mismatch``): approve it on its own.
    """
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.DECIDE)
    body = await body_of(request, GroupDecisionRequest)
    # Who decides, in the served hitl.yaml's words (as for Slack's Approve all), narrowed to the token's roles.
    reviewer = await TokenReviewers(caller, ctx.lifecycle.contexts.default.service.reviewers).reviewer(caller.reviewer)
    group = GroupDecideRequest(
        tuple(GroupMember(m.id, m.expected_version, m.action_hash) for m in body.approvals),
        reviewer,
        DecisionKind(body.decision),
        reason=body.reason,
        via=caller.via,
    )

    async def read(approval_id: str) -> Approval:
        approval = await ctx.lifecycle.store.approvals.get(approval_id)
        # The same answer as a missing one: the token learns nothing of it (the answer would show it whole), nor of
        # one outside its roles.
        if not may_see(caller, approval, now=ctx.lifecycle.contexts.clock.now()):
            raise NotFound.approval(approval_id)
        return approval

    outcome = await ctx.lifecycle.decide_group(group, read=read)
    view = await _view(ctx, caller, outcome, group.digest)
    return web.json_response(view.model_dump(mode="json"))


async def _view(ctx: ApiContext, caller: Caller, outcome: GroupOutcome, digest: str) -> GroupDecisionView:
    views: list[ApprovalView | None] = []
    for m in outcome.members:
        a = m.approval
        if a is None:
            views.append(None)
            continue
        note = practice_note(a) if m.recorded and is_practice(a) else None  # to the decider only, as for one
        update = {"can_decide": await ctx.can_decide(caller, a), "practice": note}
        views.append(ApprovalView.of(a, ctx.present(a)).model_copy(update=update))
    return GroupDecisionView.of(outcome, digest, views)


def routes() -> list[Endpoint]:
    """The group decision endpoint."""
    return [Endpoint("POST", "/decisions", decide_group, GroupDecisionView, (403,), body=GroupDecisionRequest)]
