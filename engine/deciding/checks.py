"""What a decision's own content is checked against before the store's atomic step: feedback only where it
answers, a reason where rejecting needs one, what approving takes (typed values, a reason), and a Modify's edited
arguments: validated against the schema the reviewer saw, and judged again by the policy (a riskier edit needs a
new approval, which supersedes the original)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from hitl.engine.domain.actions import clean_args
from hitl.engine.domain.arg_schema import validate_args
from hitl.engine.domain.confirmation import confirmation_problem
from hitl.engine.domain.drafts import ApprovalDrafts
from hitl.engine.domain.edits import merge_patch
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Tier
from hitl.engine.domain.policy import Verdict
from hitl.engine.domain.questions import answer_problem
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import ErrorCode, InvalidInput, PolicyError
from hitl.engine.ports import Clock

__all__ = ["ArgsValidator", "EditingService", "checked_edit"]

ArgsValidator = Callable[[str, dict[str, Any]], dict[str, Any]]
"""Validates edited arguments for a tool and returns them normalised, or raises InvalidInput."""

_ANSWERED_BY_FEEDBACK = frozenset({ApprovalKind.GATE, ApprovalKind.REVIEW, ApprovalKind.DOUBT})
"""What feedback answers: a review (the step before runs again with it) or an effect in doubt ("Mark done")."""


class EditingService(Protocol):
    """What the checks use of the service that decides."""

    validate_args: ArgsValidator | None
    clock: Clock

    @property
    def drafts(self) -> ApprovalDrafts:
        """Builds the approvals the service makes (a riskier edit's replacement)."""
        ...

    async def explain(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        session_id: str = "",
        requester: str | None = None,
        min_tier: Tier = Tier.AUTO,
        instead_of: Approval | None = None,
    ) -> Verdict:
        """The policy's verdict on ``args``, recording nothing."""
        ...


async def checked_edit(
    service: EditingService, current: Approval, request: DecideRequest
) -> tuple[dict[str, Any] | None, Approval | None]:
    """The edited arguments a decision runs with (None: it edits nothing), and the approval that replaces
    ``current`` when the edit needs other approvers; raises a coded error for a decision that cannot stand."""
    kind, reason, args = request.kind, request.reason, request.args
    if kind is DecisionKind.FEEDBACK and current.kind not in _ANSWERED_BY_FEEDBACK:
        raise InvalidInput(
            f"feedback goes to review gates; {current.id} is a {current.tool} action: reject it with a reason, "
            "or modify its arguments",
            approval_id=current.id,
        )
    if kind is DecisionKind.REJECT and not reason and current.reason_required:
        raise InvalidInput(
            f"rejecting {current.tool} needs a reason; pass --reason or fill in the reason field",
            approval_id=current.id,
        )
    if kind is not DecisionKind.MODIFY:
        if (problem := answer_problem(current, kind, None)) is not None:
            raise InvalidInput(problem, approval_id=current.id)
        _attended(current, request, current.execute_args)
        return None, None
    if args is None:
        raise InvalidInput("modify needs the edited arguments (--args JSON)", approval_id=current.id)
    if "batch" in current.metadata:
        raise InvalidInput("a batch cannot be modified item by item; reject it and propose a new batch")
    if not current.modifiable:
        asker = current.metadata.get("framework", "its asker")
        raise InvalidInput(
            f"{current.id} cannot be modified: {asker} cannot run edited arguments; approve it as it is, or "
            "reject it with a reason that says what to change",
            approval_id=current.id,
        )
    edited = dict(args) if request.replace_args else merge_patch(current.execute_args, args)
    new_args = _validated(service, current, edited)
    if (problem := answer_problem(current, kind, new_args)) is not None:
        raise InvalidInput(problem, approval_id=current.id)
    _attended(current, request, new_args)
    return new_args, await _replacement_if_riskier(service, current, new_args)


def _validated(service: EditingService, current: Approval, args: dict[str, Any]) -> dict[str, Any]:
    """Edited arguments checked against the schema snapshot the reviewer saw, else the tool's declared one."""
    clean = clean_args(current.tool, args)
    if current.args_schema is not None:
        clean = validate_args(current.tool, current.args_schema, clean)
    return service.validate_args(current.tool, clean) if service.validate_args else clean


async def _replacement_if_riskier(
    service: EditingService, current: Approval, new_args: dict[str, Any]
) -> Approval | None:
    """Re-run the policy on the edited arguments; a higher tier (or a quorum) needs a new approval."""
    verdict = await service.explain(
        current.tool, new_args, session_id=current.session_id, requester=current.requester, instead_of=current
    )
    if verdict.denied:
        raise PolicyError(
            f"the edited {current.tool} is denied by policy; reject it instead",
            code=ErrorCode.POLICY_DENIED,
            approval_id=current.id,
        )
    if verdict.tier.rank <= current.tier.rank and current.quorum == 1 and verdict.quorum <= 1:
        return None
    return service.drafts.replacement(current, new_args, verdict, now=service.clock.now())


def _attended(current: Approval, request: DecideRequest, runs_with: Mapping[str, Any]) -> None:
    """Refuse an approving decision that does not give what approving ``current`` takes (typed values, a reason)."""
    problem = confirmation_problem(
        current, request.kind, typed=request.confirm, reason=request.reason, runs_with=runs_with
    )
    if problem is not None:
        raise InvalidInput(problem, code=ErrorCode.CONFIRMATION_MISMATCH, approval_id=current.id)
