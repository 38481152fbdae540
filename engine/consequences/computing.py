"""A proposal's consequence, computed when the call will ask a person: after validation and the policy's verdict
(never for a call the policy denies or lets run), under the tool's limits, and audited with the tool, the
arguments' digest, how long it took and how it ended."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass

from hitl.engine.consequences.callables import ConsequenceFn, Source
from hitl.engine.consequences.running import ConsequenceCall, ConsequenceRunner
from hitl.engine.domain.consequences import ConsequenceLimits, ConsequenceOutcome, not_computed
from hitl.engine.domain.models import Approval, ApprovalKind
from hitl.engine.domain.policy import Policy
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.redaction import Redactor
from hitl.engine.domain.tally import TallyKey, consequence_counts

__all__ = ["CONSEQUENCE_EVENT", "Computed", "with_consequence"]

log = logging.getLogger(__name__)

CONSEQUENCE_EVENT = "consequence"
"""The audit event of a consequence computed (or not) for an approval."""


@dataclass(frozen=True)
class Computed:
    """What computing a consequence records: its audit entry, and the counts ``hitl stats`` and ``/metrics`` read
    (how it ended, how long it took, per tool and tier)."""

    audit: AuditEntry
    counts: dict[TallyKey, float]


_ELSEWHERE = (
    "failed: this process cannot run the tool's consequence (given in Python to the process that asked, or no longer "
    "in hitl.yaml)"
)


_ABOUT_AN_ACTION = (ApprovalKind.ACTION, ApprovalKind.PRACTICE)
"""The kinds whose card asks about a call: a practice twin shows the consequence of its own arguments, computed
as any other's (one computed for its real approval's, or none where a real one has one, would tell it apart)."""


async def with_consequence(
    runner: ConsequenceRunner,
    policy: Policy,
    redactor: Redactor,
    approval: Approval,
    *,
    given: ConsequenceFn | None,
    now: float,
    within: float | None = None,
) -> tuple[Approval, Computed | None]:
    """``approval`` with its tool's consequence (``hitl.yaml``'s ``consequence:``, else ``given``, the one given
    beside the tool in Python), and what records computing it; as it was, with no record, when the
    tool has none (or the approval asks about a batch, or about no call: a spot check, a question). An approval
    that already holds one is an edit of one that had it (:meth:`~hitl.engine.service.ApprovalService.decide`):
    when its callable was given in another process, it holds a failed one saying so, never one computed for other
    arguments. ``within``: the seconds it may take when fewer than its tool's bound."""
    declared = policy.spec.tools.get(approval.tool)
    source: Source | None = declared.consequence if declared is not None else None
    source = source or given
    if source is None and approval.consequence is not None:
        return approval.model_copy(update={"consequence": not_computed(ConsequenceOutcome.FAILED, _ELSEWHERE)}), None
    if source is None or "batch" in approval.metadata or approval.kind not in _ABOUT_AN_ACTION:
        return approval, None
    limits = declared.consequence_limits if declared is not None else ConsequenceLimits()
    if within is not None and within < limits.timeout:  # a surface must answer: the consequence gets less time
        limits = limits.model_copy(update={"timeout": max(within, 0.01)})
    started = time.monotonic()
    try:
        redact = lambda text: redactor.redact_bounded(text, limits.max_bytes)  # noqa: E731
        consequence = await runner.compute(ConsequenceCall(approval.tool, source, approval.args, limits, redact))
    except Exception as exc:  # a runner promises not to raise; if one does, the person is still asked, without it
        log.exception("computing %s's consequence failed", approval.tool)
        consequence = not_computed(ConsequenceOutcome.FAILED, f"failed: hitl could not run it ({type(exc).__name__})")
    took = time.monotonic() - started
    digest = hashlib.sha256(json.dumps(approval.args, sort_keys=True, default=str).encode()).hexdigest()
    entry = AuditEntry(
        at=now,
        actor=approval.requester[:200],
        event=CONSEQUENCE_EVENT,
        approval_id=approval.id,
        version=approval.version,
        action_hash=approval.action_hash,
        outcome=str(consequence.outcome),
        detail=f"{approval.tool[:100]}: args sha256 {digest}; {took * 1000:.0f} ms; {consequence.why or 'shown'}"[:500],
    )
    counts = consequence_counts(approval.tool, str(approval.tier), str(consequence.outcome), now=now, took=took)
    return approval.model_copy(update={"consequence": consequence}), Computed(entry, counts)
