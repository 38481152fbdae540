"""An agent step: an agent runs on a rendered input; each tool call it makes is a gated, exactly-once effect.

Durability comes from the run, not from the framework. The step's rendered prompt and input, every model turn
and every tool call's answer are kept in the checkpoint (``RunState.agents``) and written with the run's next
commit, so a model turn is saved before any effect it asks for. When a call needs a person, the agent is
stopped and the run pauses; a resume, in any process, starts a fresh agent that replays the recorded turns and
answers (no model is asked again, no tool runs again) until it reaches the call that waited, now decided.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

from hitl.engine.domain.runs import RunState, RunStatus
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput
from hitl.engine.execution.effects import EffectFailed
from hitl.engine.execution.schema import ToolSchema
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.agent_backend import (
    AgentBackend,
    AgentRequest,
    AgentStopped,
    AgentTool,
    CallAnswer,
    ModelChoice,
    load_backend,
)
from hitl.engine.runner.outcomes import Stop
from hitl.engine.runner.step_context import Ask, StepContext
from hitl.engine.runner.templates import render_value
from hitl.engine.workflow.definition import AgentStep, LoadedWorkflow

__all__ = ["AgentHandler", "parse_json_answer"]

_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\}|\[.*?\])\s*```", re.DOTALL)


class AgentHandler:
    """Runs an ``agent`` step: the agent framework drives the conversation; each tool call goes through the policy and
    runs once."""

    def __init__(self, context: StepContext, backend: AgentBackend | None = None) -> None:
        self.context = context
        self._backend = backend

    @property
    def backend(self) -> AgentBackend:
        if self._backend is None:  # loaded when a workflow first runs an agent: others never need one
            self._backend = load_backend()
        return self._backend

    async def run(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, step: AgentStep, **extra: Any
    ) -> Stop | None:
        """Run (or resume) the agent; ``extra`` joins the template scope (a worker's ``task``)."""
        context = self.context
        it = state.iteration.get(step.id, 0)
        spec = wf.spec.agents[step.agent]
        record = state.agents.get(f"{step.id}:{it}")
        if record is None:
            # Rendered once, when the step starts: a resume with new --var values never changes a conversation
            # already under way (its recorded turns answer the input they were given).
            scope = context.scope(state, step.id, **extra)
            record = {
                "system": str(render_value(spec.prompt, scope, where=f"agents.{step.agent}.prompt")),
                "input": str(render_value(step.input, scope, where=f"steps.{step.id}.input")),
                "turns": [],
                "calls": {},
            }
            state.agents[f"{step.id}:{it}"] = record
            await context.save(state)
        calls = _Calls(context, state, step, {n: tools[n] for n in spec.tools}, record, it)
        request = AgentRequest(
            name=step.agent,
            system=record["system"],
            input=record["input"],
            tools=[AgentTool(n, wf.spec.tools[n].description, tools[n].schema.json or _OPEN) for n in spec.tools],
            model=_model(wf, step.agent),
            iteration=it,
            turns=record["turns"],
            call=calls.answer,
            recorded=lambda: context.save(state),
            max_turns=spec.max_turns,
        )
        try:
            reply = await self.backend.run(request)
        except AgentStopped as stop:  # a backend that lets the signal through
            return stop.halt
        except EngineError:
            raise
        except Exception as exc:  # the model or the framework failed: the step fails, saying how
            raise EngineError(
                f"agent {step.agent} (step {step.id}) failed: {type(exc).__name__}: {exc}; fix the cause, then "
                "`hitl resume` continues from the last recorded turn",
                code=ErrorCode.AGENT_FAILED,
                step=step.id,
            ) from exc
        if reply.stopped:
            if calls.halt is None:
                raise EngineError(f"agent {step.agent} stopped without a reason", code=ErrorCode.AGENT_FAILED)
            return calls.halt
        output: Any = reply.text
        if spec.output_schema is not None:
            output = _structured(step, reply.text, spec.output_schema)
        state.outputs[step.id] = output
        state.responses[step.id] = reply.text
        del state.agents[f"{step.id}:{it}"]  # finished: its turns are never replayed again
        return None


_OPEN: dict[str, Any] = {"type": "object", "properties": {}}


def _model(wf: LoadedWorkflow, agent: str) -> ModelChoice:
    runtime = wf.spec.runtime
    own = wf.spec.agents[agent].model
    provider = (own.provider if own and own.provider else None) or runtime.provider or "scripted"
    script = (wf.path.parent / runtime.script).resolve() if runtime.script else None
    return ModelChoice(
        provider=provider,
        model_id=(own.model_id if own and own.model_id else None) or runtime.model_id,
        params={**runtime.params, **(own.params if own else {})},
        script=script,
    )


def parse_json_answer(text: str) -> Any:
    """The JSON in an agent's answer: the whole answer, a fenced block, or the outermost object; None if none."""
    candidates = [text.strip(), *(m.group(1) for m in _FENCED.finditer(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _structured(step: AgentStep, text: str, schema: dict[str, Any]) -> Any:
    found = parse_json_answer(text)
    if not isinstance(found, dict):
        raise EngineError(
            f"agent {step.agent} (step {step.id}) did not answer with a JSON object, which its output_schema "
            "requires; tell it so in its prompt",
            code=ErrorCode.AGENT_FAILED,
            step=step.id,
        )
    try:
        return ToolSchema(f"{step.agent} output", schema).validate(found)
    except InvalidInput as exc:
        raise EngineError(
            f"agent {step.agent} (step {step.id}) answered JSON that its output_schema refuses: {exc.message}",
            code=ErrorCode.AGENT_FAILED,
            step=step.id,
        ) from None


@dataclass
class _Calls:
    """Answers one agent run's tool calls: recorded answers first, then policy, approval and the effect."""

    context: StepContext
    state: RunState
    step: AgentStep
    tools: dict[str, Tool]
    record: dict[str, Any]
    iteration: int
    halt: Stop | None = None
    stopping: bool = field(default=False)

    async def answer(self, tool_name: str, args: dict[str, Any], call_id: str, note: str) -> CallAnswer:
        done = self.record["calls"].get(call_id)
        if done is not None:  # answered before this resume: the same answer, nothing asked or run again
            return CallAnswer(**done)
        if self.stopping:  # an earlier call of this turn is waiting: stop before this one too
            raise AgentStopped(self.halt or Stop(RunStatus.PAUSED))
        answer = await self._decide(tool_name, args, call_id, note)
        self.record["calls"][call_id] = answer.as_dict()
        await self.context.save(self.state)
        return answer

    async def _decide(self, tool_name: str, args: dict[str, Any], call_id: str, note: str) -> CallAnswer:
        tool = self.tools.get(tool_name)
        if tool is None:
            return CallAnswer(False, message=f"{tool_name} is not one of this agent's tools; it did not run")
        try:
            args = tool.schema.validate(args)
        except InvalidInput as exc:
            return CallAnswer(False, message=f"{tool_name} did not run: {exc.message}")
        context, state, step = self.context, self.state, self.step
        key = f"{state.session_id}:{step.id}:{self.iteration}:{call_id}"
        evidence = f"{step.agent}: {note}" if note else f"{step.agent} asked for it"
        ask = Ask(step.id, evidence, step.approval == "required", step.timeout, key=key)
        verdict = await context.standing(state, ask, tool.name, args, schema=tool.schema.json)
        if isinstance(verdict, Stop):
            if verdict.status is RunStatus.PAUSED:
                self._stop(verdict)
            return CallAnswer(False, message=f"{tool_name} did not run: {verdict.reason or verdict.status}")
        run_args = verdict.execute_args if verdict is not None else args
        try:
            out = await context.effect(state, step.id, tool, run_args, key=key, approval=verdict)
        except EffectFailed as exc:
            return CallAnswer(False, message=exc.message)
        if isinstance(out, Stop):  # its effect is in doubt: a person says what happened (or stops the run)
            self._stop(out)
        if run_args != args:  # the model learns what actually ran
            return CallAnswer(True, output={"result": out, "ran_with": run_args, "note": "a reviewer changed it"})
        return CallAnswer(True, output=out)

    def _stop(self, halt: Stop) -> NoReturn:
        self.halt, self.stopping = halt, True
        raise AgentStopped(halt)
