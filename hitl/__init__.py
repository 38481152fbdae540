"""hitl: human approval gates for the actions of AI agents and automated workflows.

This package is what users import. It is also the composition root: the ``hitl`` command and ``hitl serve``
live here, the only place that wires the engine to the Slack adapter. Importing ``hitl`` loads neither Slack
nor aiohttp: an agent process that only proposes and waits writes to the store, and ``hitl serve`` on the same
store posts and updates the cards.

The public API is what ``__all__`` lists; everything else may change between releases.
"""

from __future__ import annotations

from engine.agent_runs import AgentResumer, AgentWatcher
from engine.ask import ActionRejected, Answer, Approvals
from engine.clock import SystemClock
from engine.compose import World, Worlds
from engine.config import HitlConfig, load_config, parse_config
from engine.domain.models import Approval, DecisionKind, Status, Tier
from engine.errors import EngineError, ErrorCode
from engine.gate import GateRefused, Ticket, ToolCall, ToolGate
from engine.lifecycle import Decided, RunLifecycle
from engine.runner import Runner, RunResult, RunStatus, load_workflow
from engine.runtime import Runtime, RuntimeSettings, open_runtime
from engine.service import ApprovalService
from engine.storage import open_store
from hitl.adapters.ask_callback import SlackAsk

__all__ = [
    "ActionRejected",
    "AgentResumer",
    "AgentWatcher",
    "Answer",
    "Approval",
    "ApprovalService",
    "Approvals",
    "Decided",
    "DecisionKind",
    "EngineError",
    "ErrorCode",
    "GateRefused",
    "HitlConfig",
    "RunLifecycle",
    "RunResult",
    "RunStatus",
    "Runner",
    "Runtime",
    "RuntimeSettings",
    "SlackAsk",
    "Status",
    "SystemClock",
    "Ticket",
    "Tier",
    "ToolCall",
    "ToolGate",
    "World",
    "Worlds",
    "load_config",
    "load_workflow",
    "open_runtime",
    "open_store",
    "parse_config",
]
