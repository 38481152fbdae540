"""A Strands ``Model`` that replays a script: every pattern runs offline and the same way every time.

A script file maps each agent to its conversations; a conversation is the turns of one run of that agent::

    researcher:
      - turns:
          - say: "I will look it up."         # text shown to reviewers beside the call
            call: search                      # a tool call (or `calls: [{tool: ..., args: ...}]`)
            args: {query: "solid-state batteries"}
          - say: "Findings: ..."              # the final answer
    editor:
      - when: "Iteration 1"                   # optional: only for an input this regular expression finds
        turns: [{say: '{"score": 6, "feedback": "add sources"}'}]
      - turns: [{say: '{"score": 9, "feedback": "good"}'}]

The conversation used is the step's round (first run, second after feedback...) among those whose ``when``
matches the input, the last one once they run out; the turn is the number of answers already in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from strands.models.model import Model

from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["Script", "ScriptedModel", "load_script", "message_events"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedCall(_Part):
    """A tool call a scripted turn makes."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class Turn(_Part):
    """One scripted model turn: what it says and the tool it calls."""

    say: str = ""
    call: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    calls: list[ScriptedCall] = Field(default_factory=list)

    def tool_calls(self) -> list[ScriptedCall]:
        return [ScriptedCall(tool=self.call, args=self.args), *self.calls] if self.call else list(self.calls)


class Conversation(_Part):
    """A scripted conversation: taken when its condition matches the prompt, its turns in order."""

    when: str | None = None
    turns: list[Turn] = Field(min_length=1)

    @field_validator("when")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"`when` is not a regular expression: {exc}") from None
        return v


class Script(_Part):
    """A script for the offline model: each agent's conversations."""

    agents: dict[str, list[Conversation]]


_SCRIPTS: dict[tuple[str, int], Script] = {}


def load_script(path: Path) -> Script:
    """Read and check a script file (cached by path and modification time)."""
    try:
        stamp = path.stat().st_mtime_ns
        cached = _SCRIPTS.get((str(path), stamp))
        if cached is not None:
            return cached
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EngineError(f"cannot read the model script {path}: {exc}", code=ErrorCode.WORKFLOW_INVALID) from None
    if isinstance(raw, dict):
        raw = {
            k: [c if isinstance(c, dict) else {"turns": c} for c in v] if isinstance(v, list) else v
            for k, v in raw.items()
        }
    try:
        script = Script.model_validate({"agents": raw})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        raise EngineError(f"model script {path}: {where}: {first['msg']}", code=ErrorCode.WORKFLOW_INVALID) from None
    _SCRIPTS[(str(path), stamp)] = script
    return script


def message_events(text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The stream events of one assistant message: its text, then its tool calls ``(id, name, args)``."""
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    if text:
        events += [{"contentBlockDelta": {"delta": {"text": text}}}, {"contentBlockStop": {}}]
    for call_id, name, args in calls:
        events += [
            {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": call_id}}}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}},
            {"contentBlockStop": {}},
        ]
    events.append({"messageStop": {"stopReason": "tool_use" if calls else "end_turn"}})
    events.append(
        {"metadata": {"usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}, "metrics": {"latencyMs": 0}}}
    )
    return events


class ScriptedModel(Model):
    """Replays ``agent``'s conversations from ``script``; ``iteration`` picks among them."""

    def __init__(self, script: Script, agent: str, iteration: int = 0) -> None:
        self.script = script
        self.agent = agent
        self.iteration = iteration

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {"provider": "scripted", "agent": self.agent}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("scripted agents answer in text; an output_schema reads the JSON in it")

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        turn = self._turn(messages)
        calls = [
            (f"{self.agent}-{self.iteration}-{_answers(messages)}-{i}", c.tool, c.args)
            for i, c in enumerate(turn.tool_calls())
        ]
        for event in message_events(turn.say, calls):
            yield event

    def _turn(self, messages: list[dict[str, Any]]) -> Turn:
        conversations = self.script.agents.get(self.agent)
        if not conversations:
            raise EngineError(f"the model script has nothing for agent {self.agent}", code=ErrorCode.AGENT_FAILED)
        given = _first_text(messages)
        fitting = [c for c in conversations if c.when is None or re.search(c.when, given)]
        if not fitting:
            raise EngineError(
                f"no conversation in the model script for agent {self.agent} fits its input {given[:80]!r}",
                code=ErrorCode.AGENT_FAILED,
            )
        conversation = fitting[min(self.iteration, len(fitting) - 1)]
        n = _answers(messages)
        if n >= len(conversation.turns):
            raise EngineError(
                f"the model script for agent {self.agent} has {len(conversation.turns)} turns; the agent asked for "
                f"turn {n + 1}",
                code=ErrorCode.AGENT_FAILED,
            )
        return conversation.turns[n]


def _answers(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def _first_text(messages: list[dict[str, Any]]) -> str:
    for m in messages:
        if m.get("role") == "user":
            return " ".join(str(b.get("text", "")) for b in m.get("content", []) if isinstance(b, dict))
    return ""
