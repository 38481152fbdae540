"""The agent watcher: a run that stopped on approvals is continued once they are all decided, exactly once, and
again after a failure (its watch job is durable), on both stores."""

from __future__ import annotations

from hitl.engine.agents.gate import ToolCall
from hitl.engine.agents.runs import AgentRuns, AgentWatcher
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.testing.conformance.agent_world import AgentWorld


class Continuer:
    """Records what the watcher asks it to continue; fails on demand."""

    framework = "demo"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail = False

    async def continue_run(self, session: str) -> bool:
        self.calls.append(session)
        if self.fail:
            raise RuntimeError("the framework could not continue")
        return True


async def test_a_watched_run_continues_once_when_every_approval_is_decided(world: AgentWorld) -> None:
    store = world.store()
    gate = world.gate(store)
    tickets = [
        await gate.check(ToolCall("refund", {"order_id": o, "amount": 30}, session="t1", framework="demo", call_id=o))
        for o in ("A", "B")
    ]
    ids = [t.approval.id for t in tickets if t.approval is not None]
    await AgentRuns(gate, "demo").watch("t1", ids)
    continuer = Continuer()
    watcher = AgentWatcher(gate, [continuer], interval=2.0)
    svc = world.service(store)

    assert await watcher.tick() == 0 and continuer.calls == []  # both pending
    await svc.decide(DecideRequest(ids[0], "U_S1", DecisionKind.APPROVE))
    assert await watcher.tick() == 0 and continuer.calls == []  # one still pending
    await svc.decide(DecideRequest(ids[1], "U_S2", DecisionKind.REJECT, reason="no"))
    continuer.fail = True
    assert await watcher.tick() == 0 and continuer.calls == ["t1"]  # failed: kept for another try
    continuer.fail = False
    assert await watcher.tick() == 1 and continuer.calls == ["t1", "t1"]
    assert await watcher.tick() == 0 and continuer.calls == ["t1", "t1"]  # finished with: never again
