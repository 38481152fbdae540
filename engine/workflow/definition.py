"""Workflow files (YAML), validated by pydantic; errors name the file, line and field."""

from __future__ import annotations

import graphlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from hitl.engine.config.yaml_file import field_text, parse_model
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.workflow.agents import AgentDef, RuntimeSpec
from hitl.engine.workflow.patterns import (
    ChainPattern,
    GraphPattern,
    ParallelPattern,
    Pattern,
    RoutingPattern,
    Where,
    WorkflowPattern,
    placed_steps,
)
from hitl.engine.workflow.steps import AgentStep, GateStep, LoopSpec, Spec, Step, ToolDef, ToolStep, step_kind

__all__ = [
    "AgentStep",
    "GateStep",
    "LoadedWorkflow",
    "LoopSpec",
    "Step",
    "ToolDef",
    "ToolStep",
    "Where",
    "Workflow",
    "WorkflowFiles",
    "describe_changes",
    "load_workflow",
    "problems",
    "union_tag",
    "where_text",
]


def where_text(loc: Where) -> str:
    """``pattern.steps[2].tool``: how a place is named in messages (``config.yaml_file`` maps it back to a line)."""
    return field_text(loc)


def union_tag(value: dict[str, Any]) -> str | None:
    """The tag of a workflow mapping in pydantic's error locations: a pattern's type, a step's kind."""
    return step_kind(value)


class Workflow(Spec):
    """A workflow file: its variables, tools, agents, and the steps or pattern it runs."""

    name: str = Field(pattern=r"^[\w.\-]{1,64}$")
    version: int | str = 1
    vars: dict[str, Any] = Field(default_factory=dict)
    """Variables with their defaults; ``null`` means the variable must be given with --var."""
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    agents: dict[str, AgentDef] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    """A chain of steps (the same as ``pattern: {type: chain, steps: [...]}``)."""
    pattern: Pattern | None = None
    config: str | None = None
    """Path of hitl.yaml, relative to this file (default: hitl.yaml beside it, if present)."""

    @property
    def flow(self) -> Pattern:
        """The pattern the run follows (a top-level ``steps:`` list is a chain)."""
        return self.pattern if self.pattern is not None else ChainPattern(type="chain", steps=self.steps)

    def placed(self) -> list[tuple[Where, Step]]:
        """Every step, with its place in the file."""
        if self.pattern is None:
            return [(("steps", i), s) for i, s in enumerate(self.steps)]
        return list(placed_steps(self.pattern))

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> Workflow:
        if info.context and info.context.get("all_problems"):
            return self  # `hitl validate` lists them all itself
        found = problems(self)
        if found:
            loc, msg = found[0]
            more = f" (and {len(found) - 1} more problems; `hitl validate` lists them all)" if len(found) > 1 else ""
            raise ValueError(f"{where_text(loc)}: {msg}{more}")
        return self


def problems(wf: Workflow) -> list[tuple[Where, str]]:
    """Every reference in ``wf`` that points nowhere, with its place (each is reported, not only the first)."""
    out: list[tuple[Where, str]] = []
    if bool(wf.steps) == (wf.pattern is not None):
        both = "give either `steps:` (a chain) or `pattern:`, not both or neither"
        out.append((("steps",) if wf.steps else (), both))
        return out
    placed = wf.placed()
    tools = ", ".join(sorted(wf.tools)) or "none"
    agents = ", ".join(sorted(wf.agents)) or "none"
    seen: set[str] = set()
    for loc, step in placed:
        if step.id in seen:
            out.append((loc, f"step id {step.id!r} is used twice"))
        seen.add(step.id)
        if isinstance(step, ToolStep):
            if step.tool not in wf.tools:
                out.append(((*loc, "tool"), f"unknown tool {step.tool!r}; tools defined: {tools}"))
            if step.for_each and step.repeat:
                out.append((loc, f"step {step.id} cannot be both for_each and repeat"))
        if isinstance(step, AgentStep) and step.agent not in wf.agents:
            out.append(((*loc, "agent"), f"unknown agent {step.agent!r}; agents defined: {agents}"))
        if step.depends_on and not isinstance(wf.pattern, WorkflowPattern):
            out.append(((*loc, "depends_on"), "depends_on is for the `workflow` pattern only"))
    for name, agent in wf.agents.items():
        for i, tool in enumerate(agent.tools):
            if tool not in wf.tools:
                out.append((("agents", name, "tools", i), f"unknown tool {tool!r}; tools defined: {tools}"))
    if wf.agents and wf.runtime.provider == "scripted" and not wf.runtime.script:
        out.append(
            (
                ("runtime",) if "runtime" in wf.model_fields_set else ("agents",),
                "the scripted provider replays `runtime.script` (a YAML file); name it, or "
                "choose a provider such as bedrock, openai, anthropic or ollama",
            )
        )
    out += _pattern_problems(wf.pattern, seen) if wf.pattern is not None else []
    return out


def _pattern_problems(pattern: Pattern, ids: set[str]) -> list[tuple[Where, str]]:
    out: list[tuple[Where, str]] = []
    base: Where = ("pattern",)
    match pattern:
        case WorkflowPattern():
            deps = {s.id: s.depends_on for s in pattern.steps}
            for i, step in enumerate(pattern.steps):
                for j, dep in enumerate(step.depends_on):
                    if dep not in deps:
                        out.append(((*base, "steps", i, "depends_on", j), f"{step.id} depends on unknown step {dep!r}"))
            cycle = _cycle(deps)
            if cycle:
                out.append(((*base, "steps"), "depends_on goes round in a circle: " + " -> ".join(cycle)))
        case ParallelPattern():
            names = [b.id for b in pattern.branches]
            for i, name in enumerate(names):
                if name in names[:i] or name in ids:
                    out.append(((*base, "branches", i, "id"), f"branch id {name!r} is used twice"))
        case RoutingPattern():
            if pattern.default is not None and pattern.default not in pattern.routes:
                out.append(((*base, "default"), f"default route {pattern.default!r} is not under routes"))
            if pattern.router is None and all(r.when is None for r in pattern.routes.values()):
                out.append(((*base, "routes"), "without a router agent, routes choose by their `when` conditions"))
        case GraphPattern():
            nodes = {s.id for s in pattern.nodes}
            if pattern.start is not None and pattern.start not in nodes:
                out.append(((*base, "start"), f"start node {pattern.start!r} is not a node"))
            for source, edges in pattern.edges.items():
                if source not in nodes:
                    out.append(((*base, "edges", source), f"edges from {source!r}, which is not a node"))
                for i, edge in enumerate(edges):
                    if edge.to != "end" and edge.to not in nodes:
                        out.append(((*base, "edges", source, i, "to"), f"edge to {edge.to!r}, which is not a node"))
        case _:
            pass
    return out


def _cycle(deps: dict[str, tuple[str, ...]]) -> list[str]:
    """One cycle in the dependency graph, if there is one, as the path that closes it (``a -> b -> a``: a depends
    on b, which depends on a). Unknown dependencies are reported on their own."""
    try:
        graphlib.TopologicalSorter({n: [d for d in ds if d in deps] for n, ds in deps.items()}).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists each node before the ones that depend on it
    return []


class LoadedWorkflow(BaseModel):
    """A workflow with where it came from and the hashes resume compares."""

    # Built when a workflow is first loaded, as its parts are (steps.Spec says why).
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)
    spec: Workflow
    path: Path
    spec_hash: str
    step_hashes: dict[str, str]
    by_id: dict[str, Step] = Field(default_factory=dict)
    """Every step by id (pattern roles included)."""
    flow: Pattern | None = None
    """The pattern the run follows (``spec.flow``, built once)."""

    @classmethod
    def of(cls, spec: Workflow, path: Path, text: str) -> LoadedWorkflow:
        """``spec``, validated from ``text`` at ``path``, with its steps by id and the hashes resume compares."""
        steps = {s.id: _digest(s.model_dump(mode="json", by_alias=True)) for _, s in spec.placed()}
        if spec.pattern is not None:
            steps["pattern"] = _digest(spec.pattern.model_dump(mode="json", by_alias=True))
        steps.update({f"agent:{n}": _digest(a.model_dump(mode="json", by_alias=True)) for n, a in spec.agents.items()})
        steps["runtime"] = _digest(spec.runtime.model_dump(mode="json"))
        steps.update({f"tool:{n}": _digest(t.model_dump(mode="json", by_alias=True)) for n, t in spec.tools.items()})
        steps["vars"] = _digest(spec.vars)
        return cls(
            spec=spec,
            path=path,
            spec_hash=hashlib.sha256(text.encode()).hexdigest(),
            step_hashes=steps,
            by_id={s.id: s for _, s in spec.placed()},
            flow=spec.flow,
        )

    def step(self, step_id: str) -> Step:
        return self.by_id[step_id]


def load_workflow(path: str | Path) -> LoadedWorkflow:
    """Read and validate a workflow file (every call reads it; :class:`WorkflowFiles` keeps what a process read)."""
    p = Path(path).resolve()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise _unreadable(path, exc) from None
    return _parse(p, text, path)


class WorkflowFiles:
    """The workflow files one runtime has read, so that a run's operations read each file once.

    A file whose ``stat`` (size, modification time, inode) is what it was at the last load is not read again;
    otherwise it is read and hashed (a resume compares the hash), and parsed only when its content changed. Owned
    by a runtime's run contexts, never shared across a process: two runtimes never see each other's reads.
    """

    def __init__(self, *, limit: int = 256) -> None:
        self.limit = limit
        self._by_stat: dict[str, tuple[tuple[int, int, int], LoadedWorkflow]] = {}
        self._by_text: dict[tuple[str, str], LoadedWorkflow] = {}

    def load(self, path: str | Path) -> LoadedWorkflow:
        """The workflow at ``path`` as it is now."""
        p = Path(path).resolve()
        try:
            st = p.stat()
            seen = self._by_stat.get(str(p))
            # A file changed within the clock's granularity could change again with the same stat ("racy git"):
            # only a file older than that is trusted by its stat.
            settled = time.time_ns() - st.st_mtime_ns > 2_000_000_000
            if seen is not None and settled and seen[0] == (st.st_size, st.st_mtime_ns, st.st_ino):
                return seen[1]
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise _unreadable(path, exc) from None
        digest = hashlib.sha256(text.encode()).hexdigest()
        loaded = self._by_text.get((str(p), digest))
        if loaded is None:
            loaded = _parse(p, text, path)
            if len(self._by_text) >= self.limit:
                self._by_text.clear()
            self._by_text[(str(p), digest)] = loaded
        if len(self._by_stat) >= self.limit:
            self._by_stat.clear()
        self._by_stat[str(p)] = ((st.st_size, st.st_mtime_ns, st.st_ino), loaded)
        return loaded


def _unreadable(path: str | Path, exc: OSError) -> EngineError:
    return EngineError(
        f"cannot read workflow {path}: {exc.strerror or exc}; check the path", code=ErrorCode.WORKFLOW_INVALID
    )


def _parse(p: Path, text: str, path: str | Path) -> LoadedWorkflow:
    spec = parse_model(
        text, Workflow, code=ErrorCode.WORKFLOW_INVALID, what="workflow", source=str(path), tag=union_tag
    )
    return LoadedWorkflow.of(spec, p, text)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def describe_changes(old: dict[str, str], new: dict[str, str]) -> str:
    """Words for what changed between two step-hash maps (for resume's refusal)."""
    changed = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
    added = sorted(new.keys() - old.keys())
    removed = sorted(old.keys() - new.keys())
    parts = []
    if changed:
        parts.append("changed: " + ", ".join(changed))
    if added:
        parts.append("added: " + ", ".join(added))
    if removed:
        parts.append("removed: " + ", ".join(removed))
    return "; ".join(parts) or "formatting only"
