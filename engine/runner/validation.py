"""``hitl validate``: every problem in a workflow file, each with its line, found without running anything.

Passes, each only when the one before found nothing it depends on: the YAML and its shape (every field pydantic
refuses), then references (steps, tools, agents, routes, nodes, dependencies) and templates (syntax, variables, the
steps a template can see), reported together, then each tool's function, imported as `hitl run` would import it
(a typo in ``function:`` is found here, not at the step that calls it). Nothing is run.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.config.yaml_file import Problem, compose, line_of, read_model
from hitl.engine.errors import EngineError
from hitl.engine.execution.tools import load_tools
from hitl.engine.runner.checks import template_problems
from hitl.engine.workflow.definition import LoadedWorkflow, Where, Workflow, problems, union_tag, where_text

__all__ = ["Problem", "policy_problems", "validate_workflow"]


def validate_workflow(path: str | Path) -> list[Problem]:
    """Every problem in the workflow file at ``path``; an empty list when it is valid."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        return [Problem(0, "(file)", f"cannot read it: {exc.strerror or exc}")]
    spec, found = read_model(text, Workflow, context={"all_problems": True}, tag=union_tag)
    if spec is None:
        return found
    node = compose(text)

    def at(loc: Where, message: str) -> Problem:
        return Problem(line_of(node, loc), where_text(loc) or "(top level)", message)

    out = [at(loc, msg) for loc, msg in problems(spec)]
    if spec.runtime.provider == "scripted" and spec.runtime.script and spec.agents:
        if not (p.parent / spec.runtime.script).is_file():
            out.append(at(("runtime", "script"), f"{spec.runtime.script} does not exist beside the workflow"))
    if not out:  # templates are checked against references that exist
        out = [at(loc, msg) for loc, msg in template_problems(LoadedWorkflow.of(spec, p, text))]
    for name, tool in spec.tools.items():  # every tool's function imports, whatever else is wrong
        try:
            load_tools({name: tool}, base=p.parent)
        except EngineError as exc:
            out.append(at(("tools", name, "function"), exc.message))
        except Exception as exc:  # importing user code can raise anything: reported, never a crash of validate
            out.append(at(("tools", name, "function"), f"importing {tool.function} raised {type(exc).__name__}: {exc}"))
    return sorted(out, key=lambda problem: problem.line)


def policy_problems(config_path: str | Path) -> list[Problem]:
    """What in ``hitl.yaml`` can never work, each with its line: rules whose conditions cannot be evaluated on
    arguments their tool's declared schema allows (at run time such a rule fails closed on every such call), and
    quorums a role cannot meet. A file that does not load is
    reported by whatever loads it; here it gives nothing."""
    p = Path(config_path)
    try:
        config = load_config(p)
        policy = config.build_policy()
        node = compose(p.read_text(encoding="utf-8"))
    except (EngineError, OSError, yaml.YAMLError):
        return []
    out = [Problem(line_of(node, loc), ".".join(map(str, loc)), message) for loc, message in config.quorum_problems()]
    for i, field, message in policy.condition_problems():
        loc = ("policy", "rules", i, field if field == "when" else _STATS_FIELD.get(field, field))
        out.append(Problem(line_of(node, loc), f"policy.rules.{i}.{field}", message))
    return out


_STATS_FIELD = {"subject": "rolling_sum", "value": "rolling_sum"}
