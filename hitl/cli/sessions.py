"""``hitl sessions list`` and ``hitl sessions show ID``: the runs waiting for people, and what each one asks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.options import JsonOpt, StoreOpt

if TYPE_CHECKING:
    from hitl.engine.domain.models import Approval
    from hitl.engine.domain.runs import RunState
    from hitl.engine.runtime.process import Runtime

__all__ = ["interrupt_details", "sessions_app"]

sessions_app = typer.Typer(
    cls=FlagGroup, help="Runs (sessions): the paused ones, and where each stands.", no_args_is_help=True
)

_GATE = {
    "approve": "Continue to the next step",
    "reject": "Stop the run",
    "feedback": "Run the reviewed step again with your feedback (--feedback TEXT)",
}
_REVIEW = {
    "approve": "Accept the current draft",
    "continue": "Another round with the evaluator's feedback (--feedback '')",
    "feedback": "Another round, guided by your text (--feedback TEXT)",
    "reject": "Stop the run",
}
_DOUBT = {
    "feedback": "Mark done: it happened (--feedback TEXT)",
    "approve": "Run again: it did not happen",
    "reject": "Stop the run",
}


def interrupt_details(a: Approval) -> dict[str, Any]:
    """What a paused run asks, in the terms of the Strands CLI proposal: type, name, prompt, preview, options,
    timeout and fallback."""
    from hitl.api.models import iso
    from hitl.cli.output import resume_command
    from hitl.engine.domain.models import ApprovalKind

    kind, name = a.kind, a.tool.partition(":")[2]
    if kind is ApprovalKind.GATE:
        typed, prompt, options = "manual_gate", str(a.args.get("prompt", "")), _GATE
    elif kind is ApprovalKind.REVIEW:
        typed, prompt, options = "quality_gate", str(a.args.get("prompt", "")), _REVIEW
    elif kind is ApprovalKind.DOUBT:
        typed, prompt, options = "effect_in_doubt", a.preview, _DOUBT
    else:
        typed, name, prompt = "tool_approval", a.tool, f"Approve {a.tool}?"
        options = {"approve": "Run it as shown", "reject": "Do not run it (--reason TEXT)"}
        if a.metadata.get("modifiable", True):
            options["modify"] = "Run it with edited arguments (--modify --args JSON)"
        if a.trustable:
            options["trust"] = "Run it and stop asking for this tool in this session"
    preview = str(a.args.get("preview", "")) if kind in (ApprovalKind.GATE, ApprovalKind.REVIEW) else (a.preview or "")
    return {
        "interrupt_id": a.id,
        "interrupt_type": typed,
        "interrupt_name": name,
        "step": a.metadata.get("step"),
        "iteration": a.metadata.get("iteration", 0),
        "status": str(a.status),
        "prompt": prompt,
        "preview": preview,
        "evidence": a.evidence,
        "options": options,
        "role": a.required_role,
        "created_at": iso(a.created_at),
        "timeout_at": iso(a.expires_at),
        "fallback_action": str(a.metadata.get("fallback", a.fallback)),
        "resume": resume_command(a),
    }


async def _state(rt: Runtime, session_id: str) -> RunState:
    from hitl.engine.domain.runs import RunState
    from hitl.engine.errors import NotFound

    found = await rt.store.runs.load(session_id)
    if found is None:
        raise NotFound.run(session_id)
    return RunState.of(found)


async def _waiting(rt: Runtime, state: RunState) -> list[Approval]:
    return [await rt.store.approvals.get(a) for a in sorted(state.waiting_on())]


_BRIEF = ("interrupt_id", "interrupt_type", "interrupt_name")


@sessions_app.command("list", cls=FlagCommand)
def sessions_list(
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many.")] = 50,
) -> None:
    """List the runs paused for a person, with what each waits on."""
    from rich.text import Text

    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import open_runtime

    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime, read_only=True) as rt:
            rows: list[dict[str, Any]] = []
            for session_id in await rt.store.runs.paused(limit=limit):
                state = await _state(rt, session_id)
                waits = [interrupt_details(a) for a in await _waiting(rt, state)]
                rows.append(
                    {
                        "session_id": session_id,
                        "workflow": state.workflow,
                        "status": str(state.status),
                        "waiting": [
                            {k: w[k] for k in ("interrupt_id", "interrupt_type", "interrupt_name")} for w in waits
                        ],
                    }
                )
        if out.json:
            out.emit({"sessions": rows})
            return 0
        if not rows:
            out.text("no paused runs")
            return 0
        shown = [
            (Text(row["session_id"]), Text(row["workflow"]), Text(_waiting_text(row["waiting"]) or "-"))  # never markup
            for row in rows
        ]
        out.table(("session", "workflow", "waiting on"), shown)
        return 0

    run_command(out, work)


@sessions_app.command("show", cls=FlagCommand)
def sessions_show(
    session_id: Annotated[str, typer.Argument(metavar="SESSION", help="A session id (ses_…).")],
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Show a run: its status, progress and, when paused, the interrupt details of each approval it waits on."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import open_runtime

    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime, read_only=True) as rt:
            state = await _state(rt, session_id)
            waits = [interrupt_details(a) for a in await _waiting(rt, state)]
        shown = {
            "session_id": state.session_id,
            "workflow": state.workflow,
            "workflow_path": state.workflow_path,
            "status": str(state.status),
            "reason": state.reason,
            "vars": state.vars,
            "steps_done": sorted(state.outputs),
            "cursor": state.cursor,
            "history": state.history,
            "interrupts": waits,
        }
        if out.json:
            out.emit(shown)
            return 0
        out.text(("session   ", "dim"), state.session_id, ("  ", ""), (str(state.status), "bold"))
        out.text(("workflow  ", "dim"), f"{state.workflow} ({state.workflow_path})")
        out.text(("done      ", "dim"), ", ".join(sorted(state.outputs)) or "-")
        for line in state.history:
            out.text(("  · ", "dim"), line)
        for w in waits:
            out.text(
                ("waiting   ", "dim"),
                (f"{w['interrupt_type']} {w['interrupt_name']}", "bold"),
                f"  {w['interrupt_id']}",
            )
            out.text(("  prompt  ", "dim"), w["prompt"])
            if w["preview"]:
                out.text(("  preview ", "dim"), w["preview"][:500])
            for key, text in w["options"].items():
                out.text((f"  [{key}] ", "dim"), text)
            out.text(("  timeout ", "dim"), f"{w['timeout_at']}, then {w['fallback_action']}")
            out.text(("  resume  ", "dim"), w["resume"])
        return 0

    run_command(out, work)


def _waiting_text(waits: list[dict[str, Any]]) -> str:
    return ", ".join(f"{w['interrupt_name']} ({w['interrupt_id']})" for w in waits)
