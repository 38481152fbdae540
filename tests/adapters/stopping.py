"""The harness shape for frameworks whose runs stop for approvals and are resumed from stored state."""

from __future__ import annotations

import abc
from typing import Any

from hitl.engine.testing.conformance.agent_world import AgentRun, AgentWorld, ScriptedCall, Transcript


class StoppingHarness(abc.ABC):
    """``runner(calls)`` builds one agent process (its own store connection); ``HitlRunner.resume`` continues."""

    framework = ""
    modifies = True

    def __init__(self, world: AgentWorld) -> None:
        self.world = world

    @abc.abstractmethod
    def runner(self, calls: list[ScriptedCall]) -> tuple[Any, Any]:
        """One agent process: the framework's HitlRunner and the store connection it uses."""

    @abc.abstractmethod
    def stopped(self, result: Any) -> bool:
        """Whether ``result`` stopped for approvals."""

    @abc.abstractmethod
    def transcript(self, result: Any) -> Transcript:
        """What the model saw in ``result``."""

    async def start(self, calls: list[ScriptedCall], *, session: str) -> AgentRun:
        runner, store = self.runner(calls)
        result = await runner.run("go", session=session)
        return AgentRun(session, calls, store, {"runner": runner, "result": result})

    async def finish(self, run: AgentRun) -> Transcript:
        result = run.state["result"]
        if result is None or self.stopped(result):
            result = await run.state["runner"].resume(run.session)
            assert result is not None, "every approval was decided, so the run must continue"
            assert not self.stopped(result)
            assert await run.state["runner"].resume(run.session) is None  # continued once: nothing waits
        return self.transcript(result)

    async def finish_shared(self, run: AgentRun) -> Transcript | None:
        result = run.state["result"]
        if result is None or self.stopped(result):
            result = await run.state["runner"].resume(run.session)
            if result is None:
                return None  # another process continued the run
        return self.transcript(result)

    async def crash(self, run: AgentRun) -> None:
        run.state.clear()  # nothing survives but the store

    async def restart(self, run: AgentRun) -> AgentRun:
        runner, store = self.runner(run.calls)
        return AgentRun(run.session, run.calls, store, {"runner": runner, "result": None})
