"""Up-front checks: everything that can be wrong before the first step runs is reported before it runs."""

from __future__ import annotations

import re
from typing import Any

from jinja2 import TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from engine.errors import ErrorCode, InvalidInput
from engine.runner.spec import GateStep, LoadedWorkflow, ToolStep

__all__ = ["check_templates", "resolve_vars"]

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


def check_templates(wf: LoadedWorkflow) -> None:
    """Template syntax, variables that exist, and step references that point backwards."""
    declared = set(wf.spec.vars)
    earlier: set[str] = set()
    for step in wf.spec.steps:
        for where, text in _templates(step):
            try:
                _ENV.parse(text)
            except TemplateSyntaxError as exc:
                raise InvalidInput(
                    f"{wf.path.name}: steps.{step.id}.{where}: template error: {exc.message}",
                    code=ErrorCode.WORKFLOW_INVALID,
                ) from None
            for name in _VAR.findall(text):
                if name not in declared:
                    raise InvalidInput(
                        f"{wf.path.name}: steps.{step.id}.{where} uses vars.{name}, which is not declared under vars",
                        code=ErrorCode.WORKFLOW_INVALID,
                    )
            visible = earlier | {step.id} if where == "repeat.until" else earlier  # a loop tests its own output
            for ref in _STEP.findall(text):
                if ref not in visible:
                    raise InvalidInput(
                        f"{wf.path.name}: steps.{step.id}.{where} uses steps.{ref}, which is not an earlier step",
                        code=ErrorCode.WORKFLOW_INVALID,
                    )
        earlier.add(step.id)


def _templates(step: ToolStep | GateStep) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(step, ToolStep):
        _collect(step.args, "args", out)
        out.append(("evidence", step.evidence))
        if step.for_each:
            out.append(("for_each", "{{ " + step.for_each + " }}"))
        if step.repeat:
            out.append(("repeat.until", "{{ " + step.repeat.until + " }}"))
    else:
        out += [("prompt", step.prompt), ("preview", step.preview)]
        if step.condition:
            out.append(("condition", "{{ " + step.condition + " }}"))
    return out


def _collect(value: Any, where: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, str):
        out.append((where, value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(v, f"{where}.{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _collect(v, f"{where}[{i}]", out)
