"""The seven workflow patterns: how a workflow's steps are arranged (and which may run at the same time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import Field

from hitl.engine.domain.durations import Seconds
from hitl.engine.workflow.steps import ID_PATTERN, AgentStep, Spec, Step

__all__ = [
    "Accept",
    "AgentCall",
    "Branch",
    "ChainPattern",
    "Edge",
    "EvaluatorOptimizerPattern",
    "GraphPattern",
    "ManualReview",
    "OrchestratorWorkersPattern",
    "ParallelPattern",
    "Pattern",
    "Route",
    "RoutingPattern",
    "Where",
    "Workers",
    "WorkflowPattern",
    "placed_steps",
]

_PARALLEL = Field(default=4, ge=1, le=32)


class AgentCall(Spec):
    """An agent in a pattern's role (router, producer, evaluator, orchestrator): one agent step."""

    id: str | None = Field(default=None, pattern=ID_PATTERN)
    """Its step id in templates (``steps.<id>.response``); default: the role's name."""
    agent: str
    input: str
    approval: Literal["policy", "required"] = "policy"
    timeout: Seconds | None = None

    def step(self, role: str) -> AgentStep:
        return AgentStep(
            id=self.id or role, agent=self.agent, input=self.input, approval=self.approval, timeout=self.timeout
        )


class ChainPattern(Spec):
    """Steps one after another (what a top-level ``steps:`` list means)."""

    type: Literal["chain"]
    steps: list[Step] = Field(min_length=1)


class WorkflowPattern(Spec):
    """Steps with ``depends_on``: each starts once those finished; independent ones run at the same time."""

    type: Literal["workflow"]
    steps: list[Step] = Field(min_length=1)
    max_parallel: int = _PARALLEL


class Branch(Spec):
    """One branch of a ``parallel`` pattern: its own steps, run beside the others."""

    id: str = Field(pattern=ID_PATTERN)
    steps: list[Step] = Field(min_length=1)


class ParallelPattern(Spec):
    """Branches at the same time (each a chain of steps), then the optional ``reduce`` steps."""

    type: Literal["parallel"]
    branches: list[Branch] = Field(min_length=1)
    reduce: list[Step] = Field(default_factory=list)
    max_parallel: int = _PARALLEL


class Route(Spec):
    """One route of a ``routing`` pattern: its steps, taken when its condition holds or the router names it."""

    when: str | None = None
    """Expression (without a router agent): the first route whose condition holds is taken."""
    steps: list[Step] = Field(min_length=1)


class RoutingPattern(Spec):
    """A router agent (its answer names a route, as ``{"route": "name"}`` or the name alone) or the routes'
    conditions pick one route; the choice is recorded in the run and its audit trail."""

    type: Literal["routing"]
    router: AgentCall | None = None
    routes: dict[str, Route] = Field(min_length=1)
    default: str | None = None
    """The route taken when nothing else matches; without it that run fails (nothing runs on a guess)."""


class ManualReview(Spec):
    """After N iterations without reaching the score, a person decides: approve the current draft, continue
    (feedback: the text becomes the next round's feedback), or reject."""

    after_iterations: int = Field(ge=1)
    prompt: str = "The quality gate is not met yet. Accept the current draft?"
    role: str | None = None
    timeout: Seconds | None = None
    fallback: Literal["cancel", "continue"] = "cancel"


class Accept(Spec):
    """When an evaluator-optimizer loop stops: a score reached, a number of rounds, or a person's review."""

    min_score: float
    max_iters: int = Field(default=5, ge=1, le=50)
    manual_review: ManualReview | None = None


class EvaluatorOptimizerPattern(Spec):
    """A producer drafts, an evaluator scores (``{"score": n, "feedback": "..."}``) until ``accept`` holds; then
    the optional ``then`` steps run on the accepted draft."""

    type: Literal["evaluator_optimizer"]
    producer: AgentCall
    evaluator: AgentCall
    accept: Accept
    then: list[Step] = Field(default_factory=list)


class Workers(Spec):
    """The workers of an orchestrator-workers pattern: one agent run per task the orchestrator plans."""

    id: str = Field(default="workers", pattern=ID_PATTERN)
    agent: str
    input: str
    """Template with ``{{ task }}`` (one item of the orchestrator's list) and ``{{ index }}``."""
    max_parallel: int = Field(default=3, ge=1, le=32)
    max_tasks: int = Field(default=10, ge=1, le=100)
    """More tasks than this fails the run (an orchestrator cannot fan out without bound)."""
    approval: Literal["policy", "required"] = "policy"
    timeout: Seconds | None = None


class OrchestratorWorkersPattern(Spec):
    """An orchestrator answers with a JSON list of tasks; workers run them (at most ``max_parallel`` at a time);
    the ``synthesis`` steps see ``steps.<workers.id>.output``, the workers' answers in task order."""

    type: Literal["orchestrator_workers"]
    orchestrator: AgentCall
    workers: Workers
    synthesis: list[Step] = Field(default_factory=list)


class Edge(Spec):
    """An edge of a ``graph`` pattern: where a node goes next, when its condition holds."""

    to: str
    """A node id, or ``end``."""
    when: str | None = None


class GraphPattern(Spec):
    """Nodes (steps) and conditional edges: after a node, the first edge whose condition holds is followed; no
    edge (or ``to: end``) ends the run. A node visited more than ``max_visits`` times fails the run."""

    type: Literal["graph"]
    nodes: list[Step] = Field(min_length=1)
    start: str | None = None
    """Default: the first node."""
    edges: dict[str, list[Edge]] = Field(default_factory=dict)
    max_visits: int = Field(default=3, ge=1, le=100)


Pattern = Annotated[
    ChainPattern
    | WorkflowPattern
    | ParallelPattern
    | RoutingPattern
    | EvaluatorOptimizerPattern
    | OrchestratorWorkersPattern
    | GraphPattern,
    Field(discriminator="type"),
]


Where = tuple[str | int, ...]
"""A place in the workflow file, as pydantic writes error locations: ``("pattern", "steps", 2, "tool")``."""


def placed_steps(pattern: Pattern, base: Where = ("pattern",)) -> Iterator[tuple[Where, Step]]:
    """Every step the pattern holds, with its place in the file (for checks and hashes). Pattern roles (router,
    producer, evaluator, orchestrator, workers) appear as the agent steps they run."""

    def listed(key: str, steps: list[Step], at: Where = base) -> Iterator[tuple[Where, Step]]:
        for i, step in enumerate(steps):
            yield (*at, key, i), step

    match pattern:
        case ChainPattern() | WorkflowPattern():
            yield from listed("steps", pattern.steps)
        case ParallelPattern():
            for b, branch in enumerate(pattern.branches):
                yield from listed("steps", branch.steps, (*base, "branches", b))
            yield from listed("reduce", pattern.reduce)
        case RoutingPattern():
            if pattern.router is not None:
                yield (*base, "router"), pattern.router.step("router")
            for name, route in pattern.routes.items():
                yield from listed("steps", route.steps, (*base, "routes", name))
        case EvaluatorOptimizerPattern():
            yield (*base, "producer"), pattern.producer.step("producer")
            yield (*base, "evaluator"), pattern.evaluator.step("evaluator")
            yield from listed("then", pattern.then)
        case OrchestratorWorkersPattern():
            yield (*base, "orchestrator"), pattern.orchestrator.step("orchestrator")
            w = pattern.workers
            yield (*base, "workers"), AgentStep(id=w.id, agent=w.agent, input=w.input, approval=w.approval)
            yield from listed("synthesis", pattern.synthesis)
        case GraphPattern():
            yield from listed("nodes", pattern.nodes)
