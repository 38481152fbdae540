"""The run commands: ``hitl run`` (a workflow until it completes or pauses for a human), ``hitl validate`` (a
workflow and its hitl.yaml checked, nothing run) and ``hitl expire`` (due approvals expired, each paused run's fallback
applied); and what ``hitl resume`` shares with them (``--var`` pairs, who may decide a paused run)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt

# A command imports what it uses when it runs (`hitl --help` loads no store, engine or server): the names below are
# for the type checker only.
if TYPE_CHECKING:
    from hitl.engine.domain.runs import RunResult
    from hitl.engine.runtime.process import Runtime
    from hitl.engine.workflow.definition import LoadedWorkflow

__all__ = ["deciding_roles", "expire", "parse_vars", "run", "validate"]


async def deciding_roles(rt: Runtime, result: RunResult, wf: LoadedWorkflow | None = None) -> dict[str, list[str]]:
    """The roles of the hitl.yaml a paused run goes by (its workflow's context when the caller started it, so
    nothing is read again; else its recorded one), to say who may decide it; none for a run that did not pause,
    or whose context cannot be composed now (the result is told all the same)."""
    from hitl.engine.domain.runs import RunStatus
    from hitl.engine.errors import EngineError

    if result.status is not RunStatus.PAUSED:
        return {}
    try:
        if wf is not None:
            return rt.contexts.for_workflow(wf).config.roles
        return (await rt.contexts.for_session(result.session_id)).config.roles
    except EngineError:
        return {}


def parse_vars(pairs: list[str], *, option: str = "--var", json_values: bool = False) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, values as text. With ``json_values`` (``--set``) a VALUE that is JSON is taken as JSON
    (``amount=80`` is a number, ``note=null`` removes the field), anything else as text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        if json_values:
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError:
                out[key] = value
        else:
            out[key] = value
    return out


def run(
    workflow: Annotated[str, typer.Argument(help="Workflow YAML file.")],
    var: Annotated[list[str] | None, typer.Option("--var", help="KEY=VALUE (repeatable).")] = None,
    interactive: Annotated[bool, typer.Option("--interactive", help="Prompt at each pause.")] = False,
    auto: Annotated[bool, typer.Option("--auto-approve", help="Approve every pause (CI only; audited).")] = False,
    auto_escalations: Annotated[
        bool, typer.Option("--auto-approve-escalations", help="Let --auto-approve approve ESCALATE tiers too.")
    ] = False,
    session: Annotated[str | None, typer.Option("--session", help="Session id (default: new).")] = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
    reviewer: AsOpt = None,
) -> None:
    """Run a workflow until it completes or pauses for a human."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import approval_view, auto_approve, interactive_loop, refuse_local_in_production
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import open_runtime
    from hitl.engine.workflow.definition import load_workflow

    out = Out(as_json=as_json)
    given = parse_vars(var or [])
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        wf = load_workflow(workflow)
        async with open_runtime(settings.runtime, kind="cli") as rt:
            if auto or interactive:  # refused before the run starts: a refusal leaves nothing behind
                what = "--auto-approve" if auto else "--interactive"
                await refuse_local_in_production(rt, workflow=wf, what=what)
            result = await rt.lifecycle.start(wf, given, session_id=session)
            if auto:
                result = await auto_approve(rt, result, out, escalations=auto_escalations)
            elif interactive:
                result = await interactive_loop(rt, settings, result, out)
            view = await approval_view(rt, result.approval) if result.approval is not None else None
            out.run_result(result, await deciding_roles(rt, result, wf), view)
            return result.exit_code

    run_command(out, work)


def validate(
    workflow: Annotated[str, typer.Argument(help="Workflow YAML file.")],
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Check a workflow and its hitl.yaml without running anything.

    Every problem with its file and line (exit 2 when there are any), including policy rules that could not be
    evaluated on arguments their tool's schema allows."""
    from rich.text import Text

    from hitl.cli.output import Out
    from hitl.engine.runner.validation import policy_problems, validate_workflow
    from hitl.engine.runtime.compose import config_path_for
    from hitl.engine.workflow.definition import load_workflow

    out = Out(as_json=as_json)
    found = [(workflow, p) for p in validate_workflow(workflow)]
    if not found:
        config_path = config_path_for(config, load_workflow(workflow))
        found += [(config_path, p) for p in policy_problems(config_path)] if config_path else []
    if out.json:
        problems = [{"file": f, **dataclasses.asdict(p)} for f, p in found]
        out.emit({"valid": not found, "problems": problems})
    elif not found:
        flow = load_workflow(workflow).spec.flow
        out.text(("valid", "bold green"), f"  {workflow}: a {flow.type} workflow")
    for file, p in [] if out.json else found:
        out.err.print(Text.assemble((f"{file}:{p.line}: ", "bold"), (p.field, "cyan"), ": ", p.message))
    raise typer.Exit(2 if found else 0)


def expire(as_json: JsonOpt = False, store: StoreOpt = None, config: ConfigOpt = None) -> None:
    """Expire due approvals and apply each paused run's fallback."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import expire_and_apply
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import open_runtime

    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime, kind="cli") as rt:
            results = await expire_and_apply(rt)
        if out.json:
            out.emit({"expired": [{"approval_id": a, "session_id": s, "status": st} for a, s, st in results]})
        else:
            for a, s, st in results:
                out.text(f"{a} expired", (f"  run {s} -> {st}" if s else "", "dim"))
            if not results:
                out.text(("nothing was due", "dim"))
        return 0

    run_command(out, work)
