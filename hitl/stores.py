"""Everything a store of your own needs, from the public door: the ports a store implements (one
``typing.Protocol`` each, and :class:`Store` that holds them), the records they take and return, and the rules a
store applies inside its atomic steps (a decision, an expiry, an execution claim), so that every store decides
alike. Prove a store with the suites in :mod:`hitl.testing.conformance`; the documentation's "A store of your own"
page walks through one.
"""

from __future__ import annotations

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.decide import DecideCommand, apply_decision, apply_expiry, run_to_resume, trust_granted
from hitl.engine.domain.delegation import Delegation
from hitl.engine.domain.execution import finished, next_claim
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.journal import ClaimIntent, Commit, Committed, Opened, OutcomeRecord
from hitl.engine.domain.models import Approval, Reviewer, Status
from hitl.engine.domain.policy import WindowStats
from hitl.engine.domain.records import AuditBreak, AuditEntry, Claim, ClaimState, Job, MessageRef, Page, TrustGrant
from hitl.engine.domain.retention import Purged, Retention
from hitl.engine.domain.runs import StoredRun
from hitl.engine.domain.tally import TallyKey, TallyRow
from hitl.engine.ports import (
    AlertStates,
    ApprovalStore,
    AuditLog,
    CallHolds,
    DelegationStore,
    ExecutionLedger,
    HaltOrders,
    JobQueue,
    Journal,
    MessageMap,
    Purger,
    RateWindows,
    RunStore,
    Store,
    Tallies,
    TrustStore,
)
from hitl.engine.receipts.claims import Issued, Redemption
from hitl.engine.receipts.ports import ReceiptLedger

__all__ = [
    "AlertStates",
    "Approval",
    "ApprovalFilter",
    "ApprovalStore",
    "AuditBreak",
    "AuditEntry",
    "AuditLog",
    "CallHolds",
    "Claim",
    "ClaimIntent",
    "ClaimState",
    "Commit",
    "Committed",
    "DecideCommand",
    "Delegation",
    "DelegationStore",
    "ExecutionLedger",
    "HaltOrder",
    "HaltOrders",
    "Issued",
    "Job",
    "JobQueue",
    "Journal",
    "MessageMap",
    "MessageRef",
    "Opened",
    "OutcomeRecord",
    "Page",
    "Purged",
    "Purger",
    "RateWindows",
    "ReceiptLedger",
    "Redemption",
    "Retention",
    "Reviewer",
    "RunStore",
    "Status",
    "Store",
    "StoredRun",
    "Tallies",
    "TallyKey",
    "TallyRow",
    "TrustGrant",
    "TrustStore",
    "WindowStats",
    "apply_decision",
    "apply_expiry",
    "finished",
    "next_claim",
    "run_to_resume",
    "trust_granted",
]
