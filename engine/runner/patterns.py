"""The seven patterns, driven from the checkpoint: each picks up where its ``cursor`` says, so a resume never
re-runs a finished step, branch, worker or round.

Gates, ``approval: required`` and batches are steps like any other, so they work inside every pattern; a step
that pauses inside concurrent work (a branch, a worker) pauses only what depends on it (:mod:`together`).
"""

from __future__ import annotations

import re
from typing import Any

from hitl.engine.domain.models import ApprovalKind, DecisionKind, Status
from hitl.engine.domain.runs import RunState, RunStatus
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.concurrency import run_together
from hitl.engine.runner.dispatch import StepRunner
from hitl.engine.runner.outcomes import Redo, Stop, goes_on, stop_for
from hitl.engine.runner.step_context import StepContext
from hitl.engine.runner.steps.agent import parse_json_answer
from hitl.engine.runner.templates import evaluate
from hitl.engine.workflow.definition import AgentStep, LoadedWorkflow, Step, ToolStep
from hitl.engine.workflow.patterns import (
    ChainPattern,
    EvaluatorOptimizerPattern,
    GraphPattern,
    OrchestratorWorkersPattern,
    ParallelPattern,
    RoutingPattern,
    WorkflowPattern,
)

__all__ = ["Patterns"]


def _reviewable(step: Step | None) -> bool:
    return isinstance(step, ToolStep | AgentStep)


class Patterns:
    """Runs a workflow's pattern until it finishes (None) or halts."""

    def __init__(self, context: StepContext, runner: StepRunner) -> None:
        self.context = context
        self.runner = runner

    async def run(self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState) -> Stop | None:
        flow = wf.flow or wf.spec.flow
        match flow:
            case ChainPattern():
                return await self.chain(wf, tools, state, flow.steps, slot=None)
            case WorkflowPattern():
                deps = {s.id: tuple(s.depends_on) for s in flow.steps}
                return await self.together(wf, tools, state, flow.steps, deps, limit=flow.max_parallel)
            case ParallelPattern():
                return await self._parallel(wf, tools, state, flow)
            case RoutingPattern():
                return await self._routing(wf, tools, state, flow)
            case EvaluatorOptimizerPattern():
                return await self._evaluator_optimizer(wf, tools, state, flow)
            case OrchestratorWorkersPattern():
                return await self._orchestrator_workers(wf, tools, state, flow)
            case GraphPattern():
                return await self._graph(wf, tools, state, flow)

    # -- the two ways steps follow each other ---------------------------------------------------------------
    async def chain(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, steps: list[Step], *, slot: str | None
    ) -> Stop | None:
        """One step after another; the position is ``state.position`` (the top-level chain) or ``cursor[slot]``."""
        ids = [s.id for s in steps]
        pos = state.position if slot is None else int(state.cursor.get(slot, 0))
        while pos < len(steps):
            before = next((s for s in reversed(steps[:pos]) if _reviewable(s)), None)
            outcome = await self.runner.run(wf, tools, state, steps[pos], before=before)
            if isinstance(outcome, Stop):
                return outcome
            pos = ids.index(outcome.step_id) if isinstance(outcome, Redo) else pos + 1
            if slot is None:
                state.position = pos
            else:
                state.cursor[slot] = pos
            state.waiting = None
            await self.context.save(state)
        return None

    async def together(
        self,
        wf: LoadedWorkflow,
        tools: dict[str, Tool],
        state: RunState,
        steps: list[Step],
        deps: dict[str, tuple[str, ...]],
        *,
        limit: int,
        slot: str = "done",
        extra: dict[str, dict[str, Any]] | None = None,
    ) -> Stop | None:
        """Steps by their dependencies, independent ones at the same time; ``cursor[slot]`` lists those done."""
        by_id = {s.id: s for s in steps}
        done = set(state.cursor.get(slot, []))

        async def one(sid: str) -> Stop | Redo | None:
            step = by_id[sid]
            before = next((by_id[d] for d in reversed(deps.get(sid, ())) if _reviewable(by_id.get(d))), None)
            outcome = await self.runner.run(wf, tools, state, step, before=before, **(extra or {}).get(sid, {}))
            if outcome is None:
                state.cursor[slot] = sorted({*state.cursor.get(slot, []), sid})
                await self.context.save(state)
            return outcome

        def redo(sid: str, again: Redo) -> None:
            done.discard(again.step_id)
            state.cursor[slot] = sorted(set(state.cursor.get(slot, [])) - {again.step_id})

        async def park(sid: str, halt: Stop) -> bool:
            return await self.context.park(state, sid, halt)

        order = [s.id for s in steps]
        return await run_together(order, deps, done, one, park, limit=limit, redo=redo)

    # -- the patterns -------------------------------------------------------------------------------------
    async def _parallel(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, flow: ParallelPattern
    ) -> Stop | None:
        steps: list[Step] = []
        deps: dict[str, tuple[str, ...]] = {}
        for branch in flow.branches:  # each branch is a chain
            for i, step in enumerate(branch.steps):
                deps[step.id] = (branch.steps[i - 1].id,) if i else ()
                steps.append(step)
        last = tuple(b.steps[-1].id for b in flow.branches)
        for i, step in enumerate(flow.reduce):  # reduce waits for every branch
            deps[step.id] = (flow.reduce[i - 1].id,) if i else last
            steps.append(step)
        return await self.together(wf, tools, state, steps, deps, limit=flow.max_parallel)

    async def _routing(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, flow: RoutingPattern
    ) -> Stop | None:
        route = state.cursor.get("route")
        if route is None:
            answer = ""
            if flow.router is not None:
                router = flow.router.step("router")
                outcome = await self.runner.run(wf, tools, state, router)
                if isinstance(outcome, Stop):
                    return outcome
                answer = state.responses.get(router.id, "")
                route = _named_route(answer, list(flow.routes))
            else:
                scope = self.context.scope(state, "router")
                route = next(
                    (n for n, r in flow.routes.items() if r.when and evaluate(r.when, scope, where=f"routes.{n}.when")),
                    None,
                )
            how = "chosen"
            if route is None and flow.default is not None:
                route, how = flow.default, "taken by default"
            if route is None:
                return Stop(
                    RunStatus.FAILED,
                    reason=f"no route fits (the router answered {answer[:120]!r}); nothing after the router ran",
                )
            state.cursor["route"] = route
            state.history.append(f"route {route} {how}")
            self.context.event(state, "run_route_chosen", f"route {route} {how}")
            await self.context.save(state)
        return await self.chain(wf, tools, state, flow.routes[str(route)].steps, slot="route_position")

    async def _evaluator_optimizer(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, flow: EvaluatorOptimizerPattern
    ) -> Stop | None:
        producer, evaluator = flow.producer.step("producer"), flow.evaluator.step("evaluator")
        accept = flow.accept
        loop: dict[str, Any] = state.cursor.setdefault("loop", {"round": 0, "phase": "produce"})
        while loop["phase"] != "accepted":
            k = int(loop["round"])
            state.iteration[producer.id] = state.iteration[evaluator.id] = k
            if loop["phase"] == "produce":
                draft = state.responses.get(producer.id, "")
                outcome = await self.runner.run(wf, tools, state, producer, draft=draft)
                if isinstance(outcome, Stop):
                    return outcome
                loop["phase"] = "evaluate"
                await self.context.save(state)
            if loop["phase"] == "evaluate":
                outcome = await self.runner.run(wf, tools, state, evaluator, draft=state.responses.get(producer.id, ""))
                if isinstance(outcome, Stop):
                    return outcome
                score, feedback = _evaluation(state.outputs.get(evaluator.id), state.responses.get(evaluator.id, ""))
                if score is None:
                    return Stop(
                        RunStatus.FAILED,
                        reason=f"the evaluator's answer has no numeric score (round {k + 1}); the quality gate "
                        "cannot pass on a guess",
                    )
                state.history.append(f"round {k + 1}: score {score:g} (needs {accept.min_score:g})")
                loop.update(score=score, feedback=feedback)
                review = accept.manual_review
                if score >= accept.min_score:
                    loop["phase"] = "accepted"
                elif review is not None and ((k + 1) % review.after_iterations == 0 or k + 1 >= accept.max_iters):
                    loop["phase"] = "review"
                elif k + 1 >= accept.max_iters:
                    return Stop(
                        RunStatus.FAILED,
                        reason=f"the draft scored {score:g} after {k + 1} rounds; it needed {accept.min_score:g}",
                    )
                else:
                    self._next_round(state, loop, producer, feedback)
                await self.context.save(state)
            if loop["phase"] == "review":
                verdict = await self._review(state, flow, producer, evaluator, loop)
                if isinstance(verdict, Stop):
                    return verdict
                await self.context.save(state)
        return await self.chain(wf, tools, state, flow.then, slot="then_position")

    async def _review(
        self,
        state: RunState,
        flow: EvaluatorOptimizerPattern,
        producer: AgentStep,
        evaluator: AgentStep,
        loop: dict[str, Any],
    ) -> Stop | None:
        """A person looks at the draft: approve it, continue (feedback: its text guides the next round), reject."""
        review = flow.accept.manual_review
        assert review is not None
        k = int(loop["round"])
        preview = (
            f"Round {k + 1}, score {loop['score']:g} (needs {flow.accept.min_score:g}). "
            f"Evaluator: {loop.get('feedback') or '-'}\n\n{state.responses.get(producer.id, '')}"
        )
        a = await self.context.review(
            state,
            f"review:{producer.id}",
            evaluator.id,
            review.prompt,
            preview[:2900],
            kind=ApprovalKind.REVIEW,
            role=review.role,
            timeout=review.timeout,
            fallback=review.fallback,
        )
        if goes_on(a) or (a.status is Status.EXPIRED and review.fallback == "continue"):
            loop["phase"] = "accepted"
            state.history.append(
                f"round {k + 1}: draft accepted by {'expiry' if a.status is Status.EXPIRED else 'review'}"
            )
            return None
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            self._next_round(state, loop, producer, a.reason or loop.get("feedback") or "")
            state.history.append(f"round {k + 1}: {a.decisions[-1].reviewer} asked for another round")
            return None
        return stop_for(a) or Stop(RunStatus.REJECTED, approval=a, reason=a.reason)

    @staticmethod
    def _next_round(state: RunState, loop: dict[str, Any], producer: AgentStep, feedback: str) -> None:
        state.feedback[producer.id] = feedback
        loop.update(round=int(loop["round"]) + 1, phase="produce")

    async def _orchestrator_workers(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, flow: OrchestratorWorkersPattern
    ) -> Stop | None:
        orchestrator, w = flow.orchestrator.step("orchestrator"), flow.workers
        if "tasks" not in state.cursor:
            outcome = await self.runner.run(wf, tools, state, orchestrator)
            if isinstance(outcome, Stop):
                return outcome
            found = parse_json_answer(state.responses.get(orchestrator.id, ""))
            tasks = found.get("tasks") if isinstance(found, dict) else found
            if not isinstance(tasks, list) or not tasks:
                return Stop(RunStatus.FAILED, reason="the orchestrator did not answer with a JSON list of tasks")
            if len(tasks) > w.max_tasks:
                return Stop(
                    RunStatus.FAILED,
                    reason=f"the orchestrator planned {len(tasks)} tasks; workers.max_tasks allows {w.max_tasks}",
                )
            state.cursor["tasks"] = tasks
            state.outputs[orchestrator.id] = tasks
            self.context.event(state, "run_tasks_planned", f"{len(tasks)} tasks")
            await self.context.save(state)
        tasks = list(state.cursor["tasks"])
        if w.id not in state.outputs:
            steps: list[Step] = [
                AgentStep(id=f"{w.id}-{i + 1}", agent=w.agent, input=w.input, approval=w.approval, timeout=w.timeout)
                for i in range(len(tasks))
            ]
            extra = {s.id: {"task": tasks[i], "index": i} for i, s in enumerate(steps)}
            halt = await self.together(
                wf, tools, state, steps, {}, limit=w.max_parallel, slot="workers_done", extra=extra
            )
            if halt is not None:
                return halt
            state.outputs[w.id] = [state.outputs[s.id] for s in steps]
            state.responses[w.id] = "\n\n".join(state.responses.get(s.id, "") for s in steps)
            await self.context.save(state)
        return await self.chain(wf, tools, state, flow.synthesis, slot="synthesis_position")

    async def _graph(
        self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState, flow: GraphPattern
    ) -> Stop | None:
        nodes = {s.id: s for s in flow.nodes}
        at: dict[str, Any] = state.cursor.setdefault(
            "graph", {"node": flow.start or flow.nodes[0].id, "visits": {}, "entered": False, "previous": None}
        )
        while at["node"] != "end":
            node = str(at["node"])
            if not at["entered"]:
                visits = int(at["visits"].get(node, 0))
                if visits >= flow.max_visits:
                    return Stop(RunStatus.FAILED, reason=f"node {node} was reached {visits} times (max_visits)")
                at["visits"][node] = visits + 1
                state.iteration[node] = visits  # a visit is a new round: its own conversation, approvals, effects
                at["entered"] = True
                await self.context.save(state)
            previous = nodes.get(str(at["previous"])) if at["previous"] else None
            outcome = await self.runner.run(wf, tools, state, nodes[node], before=previous)
            if isinstance(outcome, Stop):
                return outcome
            if isinstance(outcome, Redo):
                at.update(node=outcome.step_id, entered=False, previous=None)
            else:
                scope = self.context.scope(state, node)
                edges = flow.edges.get(node, [])
                nxt = next(
                    (e.to for e in edges if e.when is None or evaluate(e.when, scope, where=f"edges.{node}.when")),
                    "end",
                )
                at.update(node=nxt, entered=False, previous=node)
                state.history.append(f"{node} -> {nxt}")
            state.waiting = None
            await self.context.save(state)
        return None


def _named_route(answer: str, routes: list[str]) -> str | None:
    """The route a router's answer names: ``{"route": name}``, the name alone, or the one name it mentions."""
    found = parse_json_answer(answer)
    if isinstance(found, dict) and str(found.get("route")) in routes:
        return str(found["route"])
    bare = answer.strip().strip("\"'`.").strip()
    if bare in routes:
        return bare
    mentioned = [r for r in routes if re.search(rf"\b{re.escape(r)}\b", answer)]
    return mentioned[0] if len(mentioned) == 1 else None  # two names: ambiguous, so none


def _evaluation(output: Any, response: str) -> tuple[float | None, str]:
    """The evaluator's ``score`` and ``feedback``, from its structured output or the JSON in its answer."""
    found = output if isinstance(output, dict) else parse_json_answer(response)
    if not isinstance(found, dict):
        return None, ""
    score = found.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None, ""
    return float(score), str(found.get("feedback", ""))
