"""Up-front checks: everything that can be wrong before the first step runs is reported before it runs."""

from __future__ import annotations

import re
from typing import Any

from jinja2 import TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from hitl.engine.domain.runs import RunState
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput
from hitl.engine.workflow.definition import (
    AgentStep,
    LoadedWorkflow,
    Step,
    ToolStep,
    Workflow,
    describe_changes,
    where_text,
)
from hitl.engine.workflow.patterns import ChainPattern, GraphPattern, OrchestratorWorkersPattern, RoutingPattern, Where

__all__ = [
    "changed_since_paused",
    "check_templates",
    "resolve_vars",
    "template_problems",
    "template_syntax_problems",
    "vars_after",
]

_ENV = SandboxedEnvironment()
_VAR = re.compile(r"\bvars\.([A-Za-z_]\w*)")
_STEP = re.compile(r"\bsteps\.([A-Za-z][\w\-]*)")


def resolve_vars(wf: LoadedWorkflow, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``--var`` values; unknown or missing variables are errors."""
    declared = wf.spec.vars
    unknown = sorted(set(given) - set(declared))
    if unknown:
        names = ", ".join(sorted(declared)) or "none"
        raise InvalidInput(
            f"unknown variable(s) {', '.join(unknown)}; {wf.path.name} declares: {names}",
            code=ErrorCode.VARIABLES_INVALID,
        )
    values = {**declared, **given}
    missing = sorted(k for k, v in values.items() if v is None)
    if missing:
        flags = " ".join(f"--var {k}=..." for k in missing)
        raise InvalidInput(f"missing variable(s) {', '.join(missing)}; pass {flags}", code=ErrorCode.VARIABLES_INVALID)
    return values


def changed_since_paused(state: RunState, wf: LoadedWorkflow) -> tuple[str, EngineError] | None:
    """What changed in the run's workflow file since the run paused, in words, and the one refusal every surface
    gives for it (a resume with ``--force`` continues with the new file instead); None when nothing changed."""
    if wf.spec_hash == state.spec_hash:
        return None
    what = describe_changes(state.step_hashes, wf.step_hashes)
    refusal = EngineError(
        f"{state.workflow_path} changed since the run paused ({what}); resume with --force to continue with the "
        "new file",
        code=ErrorCode.WORKFLOW_CHANGED,
        session_id=state.session_id,
    )
    return what, refusal


def vars_after(state: RunState, wf: LoadedWorkflow, overrides: dict[str, Any]) -> dict[str, Any]:
    """The run's variables with ``overrides`` for the steps still to come; refused for a run that has ended and
    for unknown or missing variables. The resume applies it, and the CLI asks it before deciding anything."""
    if state.status.ended:
        raise InvalidInput(
            f"run {state.session_id} has ended ({state.status}); variables can change only on a run still to go",
            session_id=state.session_id,
        )
    return resolve_vars(wf, {**state.vars, **overrides})


def check_templates(wf: LoadedWorkflow) -> None:
    """Template syntax, variables that exist, and step references that point to steps the template can see."""
    found = template_problems(wf.spec)
    if found:
        loc, msg = found[0]
        more = f" (and {len(found) - 1} more problems; `hitl validate` lists them all)" if len(found) > 1 else ""
        raise InvalidInput(f"{wf.path.name}: {where_text(loc)}: {msg}{more}", code=ErrorCode.WORKFLOW_INVALID)


def template_problems(spec: Workflow) -> list[tuple[Where, str]]:
    """Every template problem, with its place in the file. In a chain a step sees the steps before it (and a loop
    its own output); in the other patterns any step of the workflow (which ones ran is the pattern's business)."""
    declared = set(spec.vars)
    chained = isinstance(spec.flow, ChainPattern)
    every = {step.id for _, step in spec.placed()} | (
        {spec.flow.workers.id} if isinstance(spec.flow, OrchestratorWorkersPattern) else set()
    )
    out: list[tuple[Where, str]] = []
    earlier: set[str] = set()
    texts: list[tuple[Where, str, set[str]]] = []
    for loc, step in spec.placed():
        for where, text in _templates(step):
            own = {step.id} if where == ("repeat", "until") else set()  # a loop tests its own output
            texts.append(((*loc, *where), text, (earlier | own) if chained else every))
        earlier.add(step.id)
    for name, agent in spec.agents.items():
        texts.append((("agents", name, "prompt"), agent.prompt, every))
    flow = spec.flow
    if isinstance(flow, RoutingPattern):
        texts += [(("pattern", "routes", n, "when"), _expr(r.when), every) for n, r in flow.routes.items() if r.when]
    if isinstance(flow, GraphPattern):
        for source, edges in flow.edges.items():
            texts += [
                (("pattern", "edges", source, i, "when"), _expr(e.when), every) for i, e in enumerate(edges) if e.when
            ]
    for loc, text, visible in texts:
        try:
            _ENV.parse(text)
        except TemplateSyntaxError as exc:
            out.append((loc, f"template error: {exc.message}"))
            continue
        for name in _VAR.findall(text):
            if name not in declared:
                out.append((loc, f"uses vars.{name}, which is not declared under vars"))
        for ref in _STEP.findall(text):
            if ref not in visible:
                what = "an earlier step" if chained else "a step of this workflow"
                out.append((loc, f"uses steps.{ref}, which is not {what}"))
    return out


def template_syntax_problems(data: Any, at: Where = ()) -> list[tuple[Where, str]]:
    """The syntax errors of every template in raw, unvalidated YAML data (``{{`` or ``{%`` in a string), each at its
    place: what can still be checked in a file whose shape is wrong."""
    if isinstance(data, dict):
        return [found for key, value in data.items() for found in template_syntax_problems(value, (*at, key))]
    if isinstance(data, list):
        return [found for i, value in enumerate(data) for found in template_syntax_problems(value, (*at, i))]
    if isinstance(data, str) and ("{{" in data or "{%" in data):
        try:
            _ENV.parse(data)
        except TemplateSyntaxError as exc:
            return [(at, f"template error: {exc.message}")]
    return []


def _expr(text: str | None) -> str:
    return "{{ " + (text or "") + " }}"


def _templates(step: Step) -> list[tuple[Where, str]]:
    out: list[tuple[Where, str]] = []
    if isinstance(step, ToolStep):
        _collect(step.args, ("args",), out)
        out.append((("evidence",), step.evidence))
        if step.for_each:
            out.append((("for_each",), _expr(step.for_each)))
        if step.repeat:
            out.append((("repeat", "until"), _expr(step.repeat.until)))
    elif isinstance(step, AgentStep):
        out.append((("input",), step.input))
    else:
        out += [(("prompt",), step.prompt), (("preview",), step.preview)]
        if step.condition:
            out.append((("condition",), _expr(step.condition)))
    return out


def _collect(value: Any, where: Where, out: list[tuple[Where, str]]) -> None:
    if isinstance(value, str):
        out.append((where, value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(v, (*where, k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _collect(v, (*where, i), out)
