"""The approvals the service makes, built before they are stored: the one a person must give for a proposed action,
the one that replaces it when an edit needs other approvers, a spot check of an action that ran without a person,
and a practice twin with a planted defect."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.actions import TRUST_TTL, WINDOWS, ProposedAction
from hitl.engine.domain.arg_schema import validate_args
from hitl.engine.domain.edits import CHANGED, changes, merge_patch
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.ids import alike, approval_id
from hitl.engine.domain.models import Approval, ApprovalKind, Status, Tier
from hitl.engine.domain.policy import Policy, Verdict
from hitl.engine.domain.practice import PracticeSpec, defect_for, planted
from hitl.engine.domain.redaction import Redactor
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.spot_checks import SPOT, SPOT_CHECK

__all__ = ["ApprovalDrafts"]


@dataclass(frozen=True)
class ApprovalDrafts:
    """Builds approvals from the policy's wording and the redaction rules.

    Args:
        policy: the tools' roles, summaries, timeouts and ``trust_ttl``.
        redactor: what untrusted evidence loses before it is stored.
        evidence_limit: the characters of evidence (and preview) kept.
    """

    policy: Policy
    redactor: Redactor
    evidence_limit: int

    def summary(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """The tool's ``summary:`` sentence for ``args`` (None without a template, or when it fails on them)."""
        return self.policy.spec.summarize(tool, args)

    def _untrusted(self, text: str) -> str:
        return self.redactor.redact_bounded(text, self.evidence_limit)

    def approval(
        self,
        request: ProposeRequest,
        verdict: Verdict,
        action: ProposedAction,
        *,
        schema: dict[str, Any] | None,
        counted: list[list[str]],
        now: float,
    ) -> Approval:
        """The approval a person must give for the call. ``schema``: the one sent with the call (else
        ``hitl.yaml``'s); ``counted``: the window events the proposal added."""
        tool, batch = request.tool, request.batch
        declared = self.policy.spec.tools.get(tool)
        if schema is None:  # the asker gave none: hitl.yaml's declared schema for the tool, if any
            schema = declared.schema_ if declared is not None else None
        trustable = verdict.trustable and batch is None
        timeout = request.timeout or verdict.timeout
        return Approval(
            id=approval_id(action.dedupe),
            session_id=request.session_id,
            dedupe_key=action.dedupe,
            tool=tool,
            args=action.clean,
            action_hash=action.digest,
            tier=verdict.tier,
            kind=request.kind,
            rule=verdict.rule,
            reasons=verdict.reasons,
            why=verdict.why,
            summary=self.summary(tool, action.clean) if batch is None else None,
            required_role=request.role or verdict.required_role,
            quorum=verdict.quorum,
            ratio=verdict.ratio,
            requester=action.requester,
            on_behalf_of=request.on_behalf_of,
            created_at=now,
            expires_at=now + timeout,
            evidence=self._untrusted(request.evidence),
            preview=self._untrusted(request.preview),
            trustable=trustable,
            reason_required=verdict.reason_required,
            confirm=tuple(name for name in verdict.confirm if name in action.clean),
            approve_reason_required=verdict.approve_reason,
            **_hand_on(verdict, now, timeout),
            metadata={
                **(request.metadata or {}),
                **({"batch": len(action.items)} if batch is not None else {}),
                **({WINDOWS: counted} if counted else {}),
                # What a Trust would grant, so the card can say it before anyone consents to it.
                **({TRUST_TTL: self.policy.spec.trust_ttl} if trustable else {}),
            },
            args_schema=schema,
        )

    def replacement(self, current: Approval, new_args: dict[str, Any], verdict: Verdict, *, now: float) -> Approval:
        """The approval an edit of ``current`` needs when its verdict asks more (a higher tier, a quorum)."""
        tier = max(verdict.tier, current.tier, key=lambda t: t.rank)
        digest = action_hash(current.tool, new_args)
        dedupe = f"{current.dedupe_key}>{digest}"
        return Approval(
            id=approval_id(dedupe),
            session_id=current.session_id,
            dedupe_key=dedupe,
            tool=current.tool,
            args=new_args,
            action_hash=digest,
            tier=tier,
            kind=current.kind,
            rule=verdict.rule,
            reasons=(*verdict.reasons, f"modified from {current.id}"),
            supersedes=current.id,
            why=verdict.why,
            summary=self.summary(current.tool, new_args),
            required_role=verdict.required_role or current.required_role,
            quorum=max(verdict.quorum, 1),
            ratio=verdict.ratio,
            **_hand_on(verdict, now, verdict.timeout),
            requester=current.requester,
            # Still that person's call: they never decide it (separation of duties), whoever edited it.
            on_behalf_of=current.on_behalf_of,
            created_at=now,
            expires_at=now + verdict.timeout,
            evidence=current.evidence,
            preview=current.preview,
            trustable=verdict.trustable,
            reason_required=verdict.reason_required or current.reason_required,
            confirm=tuple(name for name in dict.fromkeys((*current.confirm, *verdict.confirm)) if name in new_args),
            approve_reason_required=verdict.approve_reason or current.approve_reason_required,
            metadata={
                **current.metadata,
                "supersedes": current.id,
                CHANGED: {k: list(v) for k, v in changes(current.execute_args, new_args).items()},
                **({TRUST_TTL: self.policy.spec.trust_ttl} if verdict.trustable else {}),
            },
            args_schema=current.args_schema,
        )

    def spot_check(self, request: ProposeRequest, verdict: Verdict, action: ProposedAction, *, now: float) -> Approval:
        """An action that ran without a person, put to reviewers after the fact: an approval of its own that no
        caller waits on and nothing executes, answered Looks right or Flag."""
        tool = request.tool
        declared = self.policy.spec.tools.get(tool)
        key = f"{SPOT}{action.dedupe}"
        return Approval(
            id=approval_id(key),
            session_id=request.session_id,
            dedupe_key=key,
            tool=f"{SPOT}{tool}",
            args=action.clean,
            action_hash=action_hash(f"{SPOT}{tool}", action.clean),
            tier=Tier.APPROVE,
            kind=ApprovalKind.SPOT_CHECK,
            rule=SPOT_CHECK,
            reasons=(f"spot check: {tool} ran without review ({verdict.tier}, rule {verdict.rule})",),
            why=(f"{tool} ran without review; a sample of such actions is checked after the fact. Did it look right?",),
            summary=self.summary(tool, action.clean),
            required_role=declared.role if declared is not None else None,
            requester=action.requester,
            created_at=now,
            expires_at=now + self.policy.spec.default_timeout,
            evidence=self._untrusted(request.evidence),
            metadata={"tier": str(verdict.tier), "modifiable": False},
        )

    def twin(self, real: Approval, spec: PracticeSpec, *, now: float) -> Approval:
        """A practice twin of ``real``: the same tool, reviewers and wording, its arguments with one planted defect,
        in a session of its own (in the form of the real one's, as its call id is); no run owns it and nothing
        executes it; created at ``now`` (:func:`~hitl.engine.domain.practice.planted` moves it to the moment it is
        stored). Raises :class:`InvalidInput` when the planted arguments do not fit the schema (nothing unchecked
        enters)."""
        defect = defect_for(spec, real.tool, real.id)
        args = merge_patch(real.args, defect.set)
        if real.args_schema is not None:
            validate_args(real.tool, real.args_schema, args)
        # Random, never derived from the real approval: nothing that knows the real one can name its twin. The id
        # has the form of any approval's; the session and the call id are drawn in the form of the real one's (a
        # session hitl made up beside an agent's own would tell the twin apart).
        key = secrets.token_hex(16)
        drawn = real.model_copy(
            update={
                "id": approval_id(key),
                "session_id": alike(real.session_id),
                "dedupe_key": key,
                "args": args,
                "action_hash": action_hash(real.tool, args),
                "summary": self.summary(real.tool, args),
                "consequence": None,  # its own arguments' is computed when it is drawn, never its real one's
                "version": 1,
                "kind": ApprovalKind.PRACTICE,
                "status": Status.PENDING,
                "decisions": (),
                "approved_args": None,
                "superseded_by": None,
                "supersedes": None,
                "reason": None,
                "metadata": {
                    **{k: real.metadata[k] for k in ("framework", "agent", TRUST_TTL) if k in real.metadata},
                    # A call id like the real one's (an agent-proposed approval shows one), never the same one.
                    **({"call_id": alike(str(real.metadata["call_id"]))} if "call_id" in real.metadata else {}),
                    "of": real.id,
                    "defect": defect.name,
                    "says": defect.says,
                    "modifiable": real.modifiable,
                },
            }
        )
        return planted(drawn, now)  # created at ``now``: its expiry and hand-on after the real one's timeouts


def _hand_on(verdict: Verdict, now: float, timeout: float) -> dict[str, Any]:
    """The backup role and hand-on time of an approval ``verdict`` asks for at ``now``, expiring after ``timeout``
    (nothing: never handed on)."""
    at = verdict.hand_on.hand_on_at(now, timeout) if verdict.hand_on is not None else None
    if verdict.hand_on is None or at is None:
        return {}
    return {"backup_role": verdict.hand_on.backup_role, "hand_on_at": at}
