"""Workflow agent steps on Strands Agents: a fresh agent per run of a step, its turns and tool calls answered by
the run (:mod:`hitl.engine.runner.agent_backend`).

Each tool call is decided in a ``BeforeToolCallEvent`` hook: the run answers it (a recorded answer on replay;
otherwise policy, approval and the effect, once). A call that must wait stops the agent with the SDK's own
interrupt; the agent object is then dropped, because the run resumes by replaying, not by restoring it. Tools run
one at a time, in the order the model asked for them, so a replay meets them in the same order.
"""

from __future__ import annotations

import json
from typing import Any

from strands import Agent
from strands.hooks import HookProvider, HookRegistry
from strands.hooks.events import BeforeToolCallEvent
from strands.tools.executors import SequentialToolExecutor
from strands.tools.tools import PythonAgentTool
from strands.types.exceptions import EventLoopException

from hitl.agent_backends.providers import build_model
from hitl.agent_backends.replay import ReplayModel
from hitl.engine.errors import EngineError
from hitl.engine.runner.agent_backend import AgentReply, AgentRequest, AgentStopped, CallAnswer

__all__ = ["StrandsAgents"]

INTERRUPT = "hitl"


class StrandsAgents:
    """The ``strands`` agent backend (entry point ``hitl.agent_backends``)."""

    async def run(self, request: AgentRequest) -> AgentReply:
        gate = _Gate(request)
        model = ReplayModel(
            build_model(request.model, agent=request.name, iteration=request.iteration),
            request.turns,
            request.recorded,
            max_turns=request.max_turns,
            agent=request.name,
        )
        agent = Agent(
            model=model,
            system_prompt=request.system,
            tools=[_tool(t.name, t.description, t.schema, gate) for t in request.tools],
            hooks=[gate],
            callback_handler=None,
            tool_executor=SequentialToolExecutor(),
            name=request.name,
        )
        try:
            result = await agent.invoke_async(request.input)
        except EventLoopException as exc:
            if isinstance(exc.original_exception, EngineError):  # hitl's own error (a store error stays retryable)
                raise exc.original_exception from None
            raise
        if gate.stopped is not None:
            return AgentReply(stopped=True)
        return AgentReply(text=str(result).strip())


class _Gate(HookProvider):
    """Answers each tool call before it runs; the tool itself only hands the answer back to the agent."""

    def __init__(self, request: AgentRequest) -> None:
        self.request = request
        self.answers: dict[str, CallAnswer] = {}
        self.stopped: AgentStopped | None = None

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self.before)

    async def before(self, event: BeforeToolCallEvent) -> None:
        use = event.tool_use
        call_id = str(use["toolUseId"])
        args = use["input"] if isinstance(use["input"], dict) else {"input": use["input"]}
        try:
            answer = await self.request.call(str(use["name"]), dict(args), call_id, _note(event))
        except AgentStopped as stop:
            self.stopped = stop
            event.interrupt(INTERRUPT, reason={"tool": str(use["name"]), "call": call_id})  # raises: the agent stops
            return
        if not answer.ok:
            event.cancel_tool = answer.message or "it did not run"
            return
        self.answers[call_id] = answer


def _tool(name: str, description: str, schema: dict[str, Any], gate: _Gate) -> PythonAgentTool:
    async def hand_back(tool_use: Any, **_: Any) -> dict[str, Any]:
        answer = gate.answers.pop(str(tool_use["toolUseId"]))
        text = answer.output if isinstance(answer.output, str) else json.dumps(answer.output, ensure_ascii=False)
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

    spec = {"name": name, "description": description or name, "inputSchema": {"json": schema}}
    return PythonAgentTool(name, spec, hand_back)  # type: ignore[arg-type]


def _note(event: BeforeToolCallEvent) -> str:
    """What the model said in the turn that asked for this call (shown to reviewers as untrusted evidence)."""
    messages = getattr(event.agent, "messages", None) or []
    if not messages:
        return ""
    content = messages[-1].get("content", []) if messages[-1].get("role") == "assistant" else []
    return " ".join(str(b["text"]) for b in content if isinstance(b, dict) and "text" in b).strip()[:1500]
