"""``hitl halt``, ``hitl unhalt`` and ``hitl halts``: the stop switch from the command line.

While a tool is halted, nothing new of it is proposed, approved or executed (rejecting still works), and runs pause
at their next step that uses it; ``hitl unhalt`` lifts the order and resumes them. Every order reaches every process
on the store within a second, and is audited.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from hitl.api.models import iso
from hitl.cli.command import run_command
from hitl.cli.context import CliSettings
from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt
from hitl.cli.output import Out
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder
from hitl.engine.errors import DecisionRefused, ErrorCode, InvalidInput
from hitl.engine.runtime.process import Runtime, open_runtime

__all__ = ["halt", "halts", "unhalt"]

ToolOpt = Annotated[
    str | None, typer.Option("--tool", help="Halt only this tool (default: every tool).", metavar="TOOL")
]


def halt(
    tool: ToolOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Why: shown to everyone the halt refuses.")] = "",
    reviewer: AsOpt = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Stop the system: nothing new runs until `hitl unhalt`.

    Every gate refuses new actions of the tool (or of every tool), pending approvals of it cannot be approved
    (rejecting still works), and runs pause at their next step that uses it. Audited; every process on the store
    obeys it within a second; it survives restarts."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        who = settings.require_reviewer()
        async with open_runtime(settings.runtime, worker_id="cli") as rt:
            await _authorized(rt, who, "halt")
            order = await rt.lifecycle.halt(tool, by=who, reason=reason)
        _print_order(out, "halted", order)
        return 0

    run_command(out, work)


def unhalt(
    tool: ToolOpt = None,
    reviewer: AsOpt = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Lift a halt and resume the runs it paused (audited)."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        who = settings.require_reviewer()
        async with open_runtime(settings.runtime, worker_id="cli") as rt:
            await _authorized(rt, who, "unhalt")
            if rt.contexts.default.config.production:
                raise InvalidInput(
                    "hitl.yaml says production: true, so unhalting against the store is refused: use the API "
                    "(POST /api/v1/unhalt with an admin token) or /hitl unhalt in Slack"
                )
            lifted, resumed = await rt.lifecycle.unhalt(tool, by=who)
            if resumed:  # no server may be running: the runs go on here, as `hitl resume` would run them
                await rt.lifecycle.process_jobs(limit=resumed)
        if lifted is None:
            scope = "every tool" if tool is None else tool
            raise InvalidInput(f"{scope} is not halted; `hitl halts` lists the halts in force")
        _print_order(out, "unhalted", lifted, resumed=resumed)
        return 0

    run_command(out, work)


def halts(as_json: JsonOpt = False, store: StoreOpt = None) -> None:
    """List the halts in force."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime, read_only=True) as rt:
            orders = await rt.store.halts.active()
        if out.json:
            out.emit({"halts": [_order_json(o) for o in orders]})
            return 0
        if not orders:
            out.text("nothing is halted")
            return 0
        table = Table(box=None, pad_edge=False)
        for column in ("scope", "by", "since", "reason"):
            table.add_column(column)
        for o in orders:
            table.add_row(_scope(o), Text(o.by), iso(o.at), Text(o.reason))
        out.console.print(table)
        return 0

    run_command(out, work)


async def _authorized(rt: Runtime, who: str, what: str) -> None:
    """The admin role's members only, when hitl.yaml defines it (the CLI holds the store: without it, anyone may)."""
    config = rt.contexts.default.config
    reviewer = await rt.contexts.default.service.reviewers.reviewer(who)
    if config.may_halt(reviewer.roles) is False:
        raise DecisionRefused(
            f"{who} may not {what}: only the {config.oversight.admin_role} role may (hitl.yaml oversight.admin_role)",
            code=ErrorCode.NOT_ELIGIBLE,
        )


def _scope(o: HaltOrder) -> str:
    return "every tool" if o.scope == EVERY_TOOL else o.scope


def _order_json(o: HaltOrder) -> dict[str, object]:
    return {"scope": o.scope, "by": o.by, "reason": o.reason, "at": iso(o.at)}


def _print_order(out: Out, verb: str, o: HaltOrder, *, resumed: int | None = None) -> None:
    if out.json:
        out.emit({"status": verb, "halt": _order_json(o), **({"resumed_runs": resumed} if resumed is not None else {})})
        return
    style = "bold red" if verb == "halted" else "bold green"
    out.text(
        (verb, style), f"  {_scope(o)}", ("  by ", "dim"), Text(o.by).plain, (f"  {o.reason}" if o.reason else "", "")
    )
    if resumed:
        out.text(("  · ", "dim"), f"{resumed} run(s) it paused went on; `hitl sessions list` shows where they stand")
