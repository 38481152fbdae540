"""``hitl validate``: every problem in a workflow file, each with its line, found without running anything.

One pass reports everything: the YAML and its shape (every field pydantic refuses); references (steps, tools,
agents, routes, nodes, dependencies) and templates (syntax, variables, the steps a template can see); and each
tool's function, imported as `hitl run` would import it (a typo in ``function:`` is found here, not at the step that
calls it). A shape problem does not hide the rest: keys pydantic does not know are set aside and the file checked
again, and the tools and templates that parse are checked whatever else is wrong. Nothing is run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.config.yaml_file import Problem, compose, line_of, load_data, place, read_model
from hitl.engine.errors import EngineError
from hitl.engine.execution.tools import load_tools
from hitl.engine.policy_engines import engines_for
from hitl.engine.runner.checks import template_problems, template_syntax_problems
from hitl.engine.workflow.definition import Where, Workflow, problems, union_tag, where_text
from hitl.engine.workflow.steps import ToolDef

__all__ = ["Problem", "policy_problems", "validate_workflow"]


def validate_workflow(path: str | Path) -> list[Problem]:
    """Every problem in the workflow file at ``path``; an empty list when it is valid."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        return [Problem(0, "(file)", f"cannot read it: {exc.strerror or exc}")]
    spec, found = read_model(text, Workflow, context={"all_problems": True}, tag=union_tag)
    if spec is None and found and all(problem.message == _EXTRA for problem in found):
        spec = _without_unknown_keys(text)  # a misspelt key hides nothing else
    if spec is None:
        return sorted(found + _parts_problems(text, p), key=lambda problem: problem.line)
    node = compose(text)

    def at(loc: Where, message: str) -> Problem:
        return Problem(line_of(node, loc), where_text(loc) or "(top level)", message)

    out = found + [at(loc, msg) for loc, msg in problems(spec)]
    if spec.runtime.provider == "scripted" and spec.runtime.script and spec.agents:
        if not (p.parent / spec.runtime.script).is_file():
            out.append(at(("runtime", "script"), f"{spec.runtime.script} does not exist beside the workflow"))
    out += [at(loc, msg) for loc, msg in template_problems(spec)]
    out += [at(loc, msg) for loc, msg in _function_problems(spec.tools, p.parent)]
    return sorted(dict.fromkeys(out), key=lambda problem: problem.line)


_EXTRA = "Extra inputs are not permitted"


def _function_problems(tools: dict[str, ToolDef], base: Path) -> list[tuple[Where, str]]:
    """Each tool's function, imported as ``hitl run`` imports it: what fails, at its ``function:``."""
    out: list[tuple[Where, str]] = []
    for name, tool in tools.items():
        try:
            load_tools({name: tool}, base=base)
        except EngineError as exc:
            out.append((("tools", name, "function"), exc.message))
        except Exception as exc:  # importing user code can raise anything: reported, never a crash of validate
            out.append((("tools", name, "function"), f"importing {tool.function} raised {type(exc).__name__}: {exc}"))
    return out


def _without_unknown_keys(text: str) -> Workflow | None:
    """The workflow with every key pydantic does not know removed (each was reported): what the rest says."""
    data = load_data(text)
    for _ in range(64):  # one key per error path; a bound, since the file is the user's
        try:
            return Workflow.model_validate(data, context={"all_problems": True})
        except ValidationError as exc:
            extra = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if len(extra) != exc.error_count():
                return None
            for loc in extra:
                _drop(data, place(data, tuple(loc), union_tag))
    return None


def _drop(data: Any, loc: tuple[Any, ...]) -> None:
    """Remove the key at ``loc``, a path of the file's own keys and indexes."""
    node = data
    for part in loc[:-1]:
        node = node[part] if isinstance(node, dict | list) else None
    if isinstance(node, dict):
        node.pop(loc[-1], None)


def _parts_problems(text: str, path: Path) -> list[Problem]:
    """When the file's shape is wrong, what can still be checked: the tools that parse (their functions import)
    and the templates' syntax, wherever they are in the file."""
    data = load_data(text)
    node = compose(text)
    found: list[tuple[Where, str]] = []
    raw_tools = data.get("tools") if isinstance(data, dict) else None
    if isinstance(raw_tools, dict):
        tools: dict[str, ToolDef] = {}
        for name, raw in raw_tools.items():
            try:
                tools[str(name)] = ToolDef.model_validate(raw)
            except ValidationError:
                continue  # reported with the shape's problems
        found += _function_problems(tools, path.parent)
    found += [(loc, message) for loc, message in template_syntax_problems(data)]
    return [Problem(line_of(node, loc), where_text(loc) or "(top level)", msg) for loc, msg in found]


def policy_problems(config_path: str | Path) -> list[Problem]:
    """What in ``hitl.yaml`` can never work, each with its line: rules whose conditions cannot be evaluated on
    arguments their tool's declared schema allows (at run time such a rule fails closed on every such call), and
    quorums a role cannot meet; ``source:`` policies that do not load (unreadable, Cedar syntax or schema, annotations
    the mapping cannot read). A file that does not load is
    reported by whatever loads it; here it gives nothing."""
    p = Path(config_path)
    try:
        config = load_config(p)
        policy = config.build_policy()
        node = compose(p.read_text(encoding="utf-8"))
    except (EngineError, OSError, yaml.YAMLError):
        return []
    found = [*config.quorum_problems(), *config.hand_on_problems()]
    out = [Problem(line_of(node, loc), ".".join(map(str, loc)), message) for loc, message in found]
    for i, field, message in policy.condition_problems():
        loc = ("policy", "rules", i, field if field == "when" else _STATS_FIELD.get(field, field))
        out.append(Problem(line_of(node, loc), f"policy.rules.{i}.{field}", message))
    engines = engines_for(config.policy, p.resolve().parent)
    for i, rule in enumerate(config.policy.rules):
        engine = engines.get(rule.name)
        for message in engine.problems() if engine is not None else []:
            # Loaded as `hitl serve` loads them; at run time each would fail closed: every call asks a person.
            loc = ("policy", "rules", i, "source")
            out.append(Problem(line_of(node, loc), f"policy.rules.{i}.source", f"{rule.name}: {message}"))
    return out


_STATS_FIELD = {"subject": "rolling_sum", "value": "rolling_sum"}
