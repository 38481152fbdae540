"""hitl: human approval gates for the actions of AI agents and automated workflows.

This package is the only one users import: the names in ``__all__`` here, what a store of your own needs in
:mod:`hitl.stores`, fakes and conformance suites in :mod:`hitl.testing`, and one adapter per framework in
``hitl.adapters.<framework>`` (``strands``, ``langgraph``, ``openai_agents``, ``pydantic_ai``), ``hitl.mcp``,
``hitl.temporal``, and :mod:`hitl.receipts`, what a protected system checks a receipt with. Everything else,
including ``hitl.engine``, ``hitl.bot`` and ``hitl.sandbox``, is internal and may change in any release.

It is also the composition root: the ``hitl`` command and ``hitl serve`` live here, the only place that wires
the engine to the Slack adapter. Importing ``hitl`` loads neither Slack nor aiohttp: an agent process that only
proposes and waits writes to the store, and ``hitl serve`` on the same store posts and updates the cards.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hitl.adapters.ask_callback import SlackAsk
    from hitl.engine.agents.ask import ActionRejected, Answer, Approvals
    from hitl.engine.agents.gate import GateRefused, Ticket, ToolCall, ToolGate, current_receipt
    from hitl.engine.agents.runs import AgentResumer, AgentWatcher
    from hitl.engine.clocks import SystemClock
    from hitl.engine.config.deprecations import HitlDeprecationWarning
    from hitl.engine.config.hitl_yaml import HitlConfig, load_config, parse_config
    from hitl.engine.domain.group_outcome import GroupOutcome, MemberOutcome, MemberResult
    from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
    from hitl.engine.domain.records import AuditEntry, Page
    from hitl.engine.domain.requests import DecideRequest, GroupDecideRequest, GroupMember, ProposeRequest
    from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, InvalidInput, NotFound, StoreError
    from hitl.engine.ports import Store
    from hitl.engine.service import Proposal
    from hitl.engine.storage import open_store
    from hitl.service import ApprovalService

__all__ = [
    "ActionRejected",
    "AgentResumer",
    "AgentWatcher",
    "Answer",
    "Approval",
    "ApprovalService",
    "Approvals",
    "AuditEntry",
    "DecideRequest",
    "DecisionKind",
    "DecisionRefused",
    "EngineError",
    "ErrorCode",
    "GateRefused",
    "GroupDecideRequest",
    "GroupMember",
    "GroupOutcome",
    "HitlConfig",
    "HitlDeprecationWarning",
    "InvalidInput",
    "MemberOutcome",
    "MemberResult",
    "NotFound",
    "Page",
    "ProposeRequest",
    "Proposal",
    "SlackAsk",
    "Status",
    "Store",
    "StoreError",
    "SystemClock",
    "Ticket",
    "Tier",
    "ToolCall",
    "ToolGate",
    "current_receipt",
    "load_config",
    "open_store",
    "parse_config",
]

_LAZY: dict[str, str] = {
    "ActionRejected": "hitl.engine.agents.ask",
    "AgentResumer": "hitl.engine.agents.runs",
    "AgentWatcher": "hitl.engine.agents.runs",
    "Answer": "hitl.engine.agents.ask",
    "Approval": "hitl.engine.domain.models",
    "ApprovalService": "hitl.service",
    "Approvals": "hitl.engine.agents.ask",
    "AuditEntry": "hitl.engine.domain.records",
    "DecideRequest": "hitl.engine.domain.requests",
    "DecisionKind": "hitl.engine.domain.models",
    "DecisionRefused": "hitl.engine.errors",
    "EngineError": "hitl.engine.errors",
    "ErrorCode": "hitl.engine.errors",
    "GateRefused": "hitl.engine.agents.gate",
    "GroupDecideRequest": "hitl.engine.domain.requests",
    "GroupMember": "hitl.engine.domain.requests",
    "GroupOutcome": "hitl.engine.domain.group_outcome",
    "HitlConfig": "hitl.engine.config.hitl_yaml",
    "HitlDeprecationWarning": "hitl.engine.config.deprecations",
    "InvalidInput": "hitl.engine.errors",
    "MemberOutcome": "hitl.engine.domain.group_outcome",
    "MemberResult": "hitl.engine.domain.group_outcome",
    "NotFound": "hitl.engine.errors",
    "Page": "hitl.engine.domain.records",
    "Proposal": "hitl.engine.service",
    "ProposeRequest": "hitl.engine.domain.requests",
    "SlackAsk": "hitl.adapters.ask_callback",
    "Status": "hitl.engine.domain.models",
    "Store": "hitl.engine.ports",
    "StoreError": "hitl.engine.errors",
    "SystemClock": "hitl.engine.clocks",
    "Ticket": "hitl.engine.agents.gate",
    "Tier": "hitl.engine.domain.models",
    "ToolCall": "hitl.engine.agents.gate",
    "ToolGate": "hitl.engine.agents.gate",
    "current_receipt": "hitl.engine.agents.gate",
    "load_config": "hitl.engine.config.hitl_yaml",
    "open_store": "hitl.engine.storage",
    "parse_config": "hitl.engine.config.hitl_yaml",
}
"""Where each public name lives. Loaded on first use (PEP 562), so ``import hitl.receipts`` in a service that only
checks receipts loads none of the engine, its store clients or pydantic."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hitl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
