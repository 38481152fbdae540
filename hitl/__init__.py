"""hitl: human approval gates for the actions of AI agents and automated workflows.

This package is the only one users import: the names in ``__all__`` here, what a store of your own needs in
:mod:`hitl.stores`, fakes and conformance suites in :mod:`hitl.testing`, and one adapter per framework in
``hitl.adapters.<framework>`` (``strands``, ``langgraph``, ``openai_agents``, ``pydantic_ai``), ``hitl.mcp`` and
``hitl.temporal``. Everything else, including ``hitl.engine``, ``hitl.bot`` and ``hitl.sandbox``, is internal and
may change in any release.

It is also the composition root: the ``hitl`` command and ``hitl serve`` live here, the only place that wires
the engine to the Slack adapter. Importing ``hitl`` loads neither Slack nor aiohttp: an agent process that only
proposes and waits writes to the store, and ``hitl serve`` on the same store posts and updates the cards.
"""

from __future__ import annotations

from hitl.adapters.ask_callback import SlackAsk
from hitl.engine.agents.ask import ActionRejected, Answer, Approvals
from hitl.engine.agents.gate import GateRefused, Ticket, ToolCall, ToolGate
from hitl.engine.agents.runs import AgentResumer, AgentWatcher
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import HitlConfig, load_config, parse_config
from hitl.engine.deprecations import HitlDeprecationWarning
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.domain.records import AuditEntry, Page
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, InvalidInput, NotFound, StoreError
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService, Proposal
from hitl.engine.storage import open_store

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
    "HitlConfig",
    "HitlDeprecationWarning",
    "InvalidInput",
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
    "load_config",
    "open_store",
    "parse_config",
]
