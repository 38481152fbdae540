"""What a decision writes, on every store that runs it as a transaction of its own (SQLite, PostgreSQL): the
approval at its new version with its ``decided`` entry and follow-up jobs, or, for a refusal, only the ``refused``
entry (a refusal is committed with its audit line, then raised). The Redis store does the same in its script."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hitl.engine.domain.decide import (
    DecideCommand,
    apply_decision,
    decided_detail,
    run_to_resume,
    trust_granted,
    trust_note,
)
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, TrustGrant
from hitl.engine.errors import DecisionRefused, StaleVersion
from hitl.engine.storage.codec import audit_for_decision

__all__ = ["DecisionWrites", "decision_writes"]


@dataclass(frozen=True)
class DecisionWrites:
    """The rows one decision writes: ``approval`` (None when it was refused), the audit entry, the jobs, and the
    trust grant a Trust makes."""

    audit: AuditEntry
    approval: Approval | None = None
    refusal: DecisionRefused | StaleVersion | None = None
    jobs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    trust: TrustGrant | None = None

    @property
    def outcome(self) -> Approval | DecisionRefused | StaleVersion:
        """What the transaction returns: the approval decided, or the refusal to raise once it committed."""
        if self.refusal is not None:
            return self.refusal
        assert self.approval is not None
        return self.approval

    @property
    def reviewer(self) -> tuple[str, float, str] | None:
        """The row of who decided what (``approval_reviewers``: reviewer, the approval's creation time, its id) the
        decision adds, None for a refusal (a refused vote makes no one a reviewer of the approval). Written by the
        decide itself: a trigger on every ``UPDATE`` of the document read the whole of it again (~35 µs of CPU a
        SQLite decide, ~20 µs a move to executing, which adds no decision)."""
        if self.approval is None:
            return None
        return self.approval.decisions[-1].reviewer, self.approval.created_at, self.approval.id


def decision_writes(current: Approval, cmd: DecideCommand, now: float, *, wall: float) -> DecisionWrites:
    """The writes of ``cmd`` on ``current`` (read in the same transaction), at ``now`` (``wall``: the real time an
    answer deadline is checked against)."""
    try:
        updated = apply_decision(current, cmd, now, wall=wall)
    except (DecisionRefused, StaleVersion) as exc:
        refused = audit_for_decision(
            current,
            actor=cmd.reviewer.id,
            event="refused",
            now=now,
            outcome=str(exc.code),
            detail=f"{cmd.kind} via {cmd.via}",
        )
        return DecisionWrites(audit=refused, refusal=exc)
    grant = trust_granted(updated, cmd)
    detail = decided_detail(cmd, updated)
    if grant is not None:
        detail += f"; {trust_note(grant)}"
    jobs: list[tuple[str, dict[str, Any]]] = [(kind, {"approval_id": updated.id}) for kind in cmd.jobs]
    run = run_to_resume(updated)
    if run is not None:
        jobs += [(kind, {"session_id": run, "approval_id": updated.id}) for kind in cmd.run_jobs]
    decided = audit_for_decision(updated, actor=cmd.reviewer.id, event="decided", now=now, detail=detail)
    if cmd.view is not None:
        # The digest apply_decision recorded on the decision: the view is encoded and hashed once per decision.
        decided = decided.model_copy(update={"view": cmd.view, "view_digest": updated.decisions[-1].view_digest})
    return DecisionWrites(audit=decided, approval=updated, jobs=jobs, trust=grant)
