"""A model whose turns are recorded in the run: a resumed agent replays them instead of asking the model again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from strands.models.model import Model

from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["ReplayModel", "compact"]


class ReplayModel(Model):
    """Wraps ``inner``: the n-th call of this agent run replays ``turns[n]`` when it was recorded; otherwise it asks
    ``inner``, records the turn (its stream events, compacted) and awaits ``recorded`` before the turn's tool calls
    run, so a turn is saved before any effect it asks for."""

    def __init__(
        self, inner: Model, turns: list[Any], recorded: Callable[[], Awaitable[None]], *, max_turns: int, agent: str
    ) -> None:
        self.inner = inner
        self.turns = turns
        self.recorded = recorded
        self.max_turns = max_turns
        self.agent = agent
        self.calls = 0

    def update_config(self, **model_config: Any) -> None:
        self.inner.update_config(**model_config)

    def get_config(self) -> Any:
        return self.inner.get_config()

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.structured_output(*args, **kwargs)

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        n, self.calls = self.calls, self.calls + 1
        if n < len(self.turns):
            for event in self.turns[n]["events"]:
                yield event
            return
        if n >= self.max_turns:
            raise EngineError(
                f"agent {self.agent} took {self.max_turns} model turns without finishing; raise its max_turns or "
                "tighten its prompt",
                code=ErrorCode.AGENT_FAILED,
            )
        events: list[Any] = []
        async for event in self.inner.stream(messages, *args, **kwargs):
            events.append(event)
            yield event
        self.turns.append({"events": compact(events)})
        await self.recorded()


def compact(events: list[Any]) -> list[Any]:
    """The same message in fewer events (a real provider streams a text in many small deltas), as plain JSON."""
    out: list[Any] = []
    for event in json.loads(json.dumps(events, default=str)):
        delta = event.get("contentBlockDelta", {}).get("delta", {}) if isinstance(event, dict) else {}
        last = out[-1].get("contentBlockDelta", {}).get("delta", {}) if out and isinstance(out[-1], dict) else {}
        if set(delta) == {"text"} and set(last) == {"text"}:
            last["text"] += delta["text"]
        elif set(delta) == {"toolUse"} and set(last) == {"toolUse"}:
            last["toolUse"]["input"] = last["toolUse"].get("input", "") + delta["toolUse"].get("input", "")
        else:
            out.append(event)
    return out
