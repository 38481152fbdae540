"""The port between the runner and an agent framework: run one agent step, its tool calls answered by the run.

The runner owns everything durable: the rendered prompt and input, each model turn the framework records in
``AgentRequest.turns`` (replayed, never taken again, on resume), and each tool call's answer (policy, approval,
the effect run once under its idempotency key). The framework only drives the conversation. The Strands backend
(:mod:`hitl.agent_backends`) registers itself under the ``hitl.agent_backends`` entry point; the engine never
imports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.runner.outcomes import Stop

__all__ = [
    "AgentBackend",
    "AgentReply",
    "AgentRequest",
    "AgentStopped",
    "AgentTool",
    "CallAnswer",
    "ModelChoice",
    "load_backend",
]

BACKENDS = "hitl.agent_backends"


@dataclass(frozen=True)
class AgentTool:
    """A workflow tool as an agent sees it."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class CallAnswer:
    """What a tool call gave the agent: its output, or why it did not run (shown to the model as an error)."""

    ok: bool
    output: Any = None
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "output": self.output, "message": self.message}


@dataclass(frozen=True)
class ModelChoice:
    """The model an agent runs on: provider, model id and parameters (credentials only from the environment)."""

    provider: str
    model_id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    script: Path | None = None
    """``scripted``: the replies file."""


class AgentStopped(Exception):  # noqa: N818 - a control signal, not a failure
    """Raised by :attr:`AgentRequest.call` when the run must stop inside the agent (a tool call waits for a person,
    or a person stopped the run); the backend ends the agent's turn and returns ``AgentReply(stopped=True)``."""

    def __init__(self, halt: Stop) -> None:
        super().__init__(halt.reason or str(halt.status))
        self.halt = halt


@dataclass
class AgentRequest:
    """One run of one agent step.

    Args:
        name: the agent's name (from the workflow).
        system: its rendered system prompt.
        input: the rendered message it is given.
        tools: the workflow tools it may call.
        model: the model to run on.
        iteration: the step's round (a scripted model picks its replies by it).
        turns: the model turns taken so far, in order. The backend replays these and appends each new one (any
            JSON it can replay), then awaits ``recorded`` so the turn is saved before any effect it asks for.
        call: answers a tool call ``(tool, args, call_id, note)``; may raise :class:`AgentStopped`.
        max_turns: model turns allowed; more is a failure.
    """

    name: str
    system: str
    input: str
    tools: list[AgentTool]
    model: ModelChoice
    iteration: int
    turns: list[Any]
    call: Callable[[str, dict[str, Any], str, str], Awaitable[CallAnswer]]
    recorded: Callable[[], Awaitable[None]]
    max_turns: int = 20


@dataclass(frozen=True)
class AgentReply:
    """How an agent run ended: its final answer, or stopped by :class:`AgentStopped`."""

    text: str = ""
    stopped: bool = False


class AgentBackend(Protocol):
    """Runs agents for workflow steps."""

    async def run(self, request: AgentRequest) -> AgentReply: ...


def load_backend(name: str = "strands") -> AgentBackend:
    """The agent backend registered as ``name`` (fails closed, saying what to install, when there is none)."""
    found = [ep for ep in entry_points(group=BACKENDS) if ep.name == name]
    why = "it is not installed"
    if found:
        try:
            backend: AgentBackend = found[0].load()()
        except ImportError as exc:
            why = f"it cannot be imported: {exc}"
        else:
            return backend
    raise EngineError(
        f"agent steps need the {name} agent backend, and {why}; install it with `pip install 'hitl-gate[strands]'`",
        code=ErrorCode.WORKFLOW_INVALID,
    )
