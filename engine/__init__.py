"""hitl engine: human approval gates for the actions of AI agents and automated workflows.

The public API is what ``__all__`` lists; everything else may change between releases.
"""

from __future__ import annotations

from engine.clock import SystemClock
from engine.config import HitlConfig, load_config, parse_config
from engine.domain.decide import DecideCommand
from engine.domain.hashing import action_hash, batch_hash, canonical_json
from engine.domain.models import Approval, Decision, DecisionKind, Reviewer, Status, Tier
from engine.domain.policy import Policy, PolicyContext, Verdict, WindowStats
from engine.domain.records import AuditEntry, Claim, ClaimState, MessageRef, Page, TrustGrant
from engine.domain.redaction import Redactor, bounded
from engine.domain.retention import Purged, Retention
from engine.domain.reviewers import Roles
from engine.errors import (
    ClaimRefused,
    DecisionRefused,
    EngineError,
    ErrorCode,
    IllegalTransition,
    InvalidInput,
    NotFound,
    PolicyError,
    StaleVersion,
    StoreError,
)
from engine.ports import (
    ApprovalStore,
    AuditLog,
    Clock,
    ExecutionLedger,
    JobQueue,
    Journal,
    MessageMap,
    Notifier,
    Purger,
    RateWindows,
    RunReporter,
    RunStore,
    Store,
    Tallies,
    TrustStore,
)
from engine.service import ApprovalService, Proposal
from engine.storage import open_store

__all__ = [
    "Approval",
    "ApprovalService",
    "ApprovalStore",
    "AuditEntry",
    "AuditLog",
    "Claim",
    "ClaimRefused",
    "ClaimState",
    "Clock",
    "DecideCommand",
    "Decision",
    "DecisionKind",
    "DecisionRefused",
    "EngineError",
    "ErrorCode",
    "ExecutionLedger",
    "HitlConfig",
    "IllegalTransition",
    "InvalidInput",
    "JobQueue",
    "Journal",
    "MessageMap",
    "MessageRef",
    "NotFound",
    "Notifier",
    "Page",
    "Policy",
    "PolicyContext",
    "PolicyError",
    "Proposal",
    "Purged",
    "Purger",
    "RateWindows",
    "Redactor",
    "Retention",
    "Reviewer",
    "Roles",
    "RunReporter",
    "RunStore",
    "StaleVersion",
    "Status",
    "Store",
    "StoreError",
    "SystemClock",
    "Tallies",
    "Tier",
    "TrustGrant",
    "TrustStore",
    "Verdict",
    "WindowStats",
    "action_hash",
    "batch_hash",
    "bounded",
    "canonical_json",
    "load_config",
    "open_store",
    "parse_config",
]
