"""Oversight from the command line: the stop switch (``hitl halt``, ``hitl unhalt``, ``hitl halts``) and the
practice approvals waiting (``hitl practice``, for the admin role).

While a tool is halted, nothing new of it is proposed, approved or executed (rejecting still works), and runs pause
at their next step that uses it; ``hitl unhalt`` lifts the order and resumes them. Every order reaches every process
on the store within a second, and is audited.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.as_reviewer import ApiCall, Ways, as_reviewer
from hitl.cli.options import JsonOpt, StoreOpt

if TYPE_CHECKING:
    from hitl.api.models import ApprovalView
    from hitl.api.oversight_models import HaltView
    from hitl.cli.output import Out
    from hitl.engine.domain.halts import HaltOrder
    from hitl.engine.domain.models import Approval
    from hitl.engine.runtime.process import Runtime

__all__ = ["halt", "halts", "practice", "reviewers", "unhalt"]

ToolOpt = Annotated[
    str | None, typer.Option("--tool", help="Halt only this tool (default: every tool).", metavar="TOOL")
]


async def _authorized(rt: Runtime, who: str, what: str) -> None:
    """The admin role's members only, when hitl.yaml defines it (the CLI holds the store: without it, anyone may).
    Under ``production: true`` nobody acts by a claimed ``--as`` against the store (audited): the API, with a token,
    says who is acting."""
    from hitl.cli.flows import refuse_claimed_in_production
    from hitl.engine.errors import DecisionRefused, ErrorCode

    await refuse_claimed_in_production(rt, who, what)
    config = rt.contexts.default.config
    reviewer = await rt.contexts.default.service.reviewers.reviewer(who)
    if config.may_halt(reviewer.roles) is False:
        raise DecisionRefused(
            f"{who} may not {what}: only the {config.oversight.admin_role} role may (hitl.yaml oversight.admin_role)",
            code=ErrorCode.NOT_ELIGIBLE,
        )


@as_reviewer("halt", guard=_authorized)
def halt(
    tool: ToolOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Why: shown to everyone the halt refuses.")] = "",
) -> Ways[Any]:
    """Stop the system: nothing new runs until `hitl unhalt`.

    Every gate refuses new actions of the tool (or of every tool), pending approvals of it cannot be approved
    (rejecting still works), and runs pause at their next step that uses it. Audited; every process on the store
    obeys it within a second; it survives restarts."""

    async def local(rt: Runtime, who: str) -> HaltOrder:
        return await rt.lifecycle.halt(tool, by=who, reason=reason)

    def show(out: Out, order: HaltOrder) -> None:
        _print_order(out, "halted", order)

    # Through the API, the token says who halts, and the server checks it may.
    return Ways(ApiCall("POST", "/halt", read=_halted, json={"tool": tool, "reason": reason}), local, show)


@as_reviewer("unhalt", guard=_authorized)
def unhalt(tool: ToolOpt = None) -> Ways[Any]:
    """Lift a halt and resume the runs it paused (audited)."""
    from hitl.engine.errors import InvalidInput

    async def local(rt: Runtime, who: str) -> tuple[HaltOrder, int]:
        lifted, resumed = await rt.lifecycle.unhalt(tool, by=who)
        if resumed:  # no server may be running: the runs go on here, as `hitl resume` would run them
            await rt.lifecycle.process_jobs(limit=resumed)
        if lifted is None:
            scope = "every tool" if tool is None else tool
            raise InvalidInput(f"{scope} is not halted; `hitl halts` lists the halts in force")
        return lifted, resumed

    def show(out: Out, done: tuple[HaltOrder, int]) -> None:
        _print_order(out, "unhalted", done[0], resumed=done[1])

    return Ways(ApiCall("POST", "/unhalt", read=_unhalted, json={"tool": tool}), local, show)


def halts(as_json: JsonOpt = False, store: StoreOpt = None) -> None:
    """List the halts in force."""
    from hitl.api.models import iso
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import open_runtime

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
        from rich.text import Text  # for people only: `--json` never imports Rich

        out.table(
            ("scope", "by", "since", "reason"), [(_scope(o), Text(o.by), iso(o.at), Text(o.reason)) for o in orders]
        )
        return 0

    run_command(out, work)


def _halted(body: object) -> HaltOrder:
    """The halt order, as the API answered ``POST /halt``."""
    from hitl.api.oversight_models import HaltView

    return _order_of(HaltView.model_validate(body))


def _unhalted(body: object) -> tuple[HaltOrder, int]:
    """The halt lifted and how many runs it resumed, as the API answered ``POST /unhalt``."""
    from hitl.api.oversight_models import Unhalted

    done = Unhalted.model_validate(body)
    return _order_of(done.halt), done.resumed_runs


def _figures(body: object) -> tuple[str, list[dict[str, Any]]]:
    """Since when, and the figures per reviewer, as the API answered ``GET /reviewers``."""
    from hitl.api.oversight_models import ReviewerFiguresList

    answer = ReviewerFiguresList.model_validate(body)
    return answer.since, [f.model_dump() for f in answer.reviewers]


def _order_of(view: HaltView) -> HaltOrder:
    """A halt order as the API answered it."""
    from hitl.engine.domain.halts import HaltOrder

    at = datetime.fromisoformat(view.at.replace("Z", "+00:00")).timestamp()
    return HaltOrder(scope=view.scope, by=view.by, reason=view.reason, at=at)


def practice_row(a: Approval) -> dict[str, object]:
    """A practice approval as `hitl practice` lists it (what was planted, and in a copy of which approval)."""
    from hitl.api.models import iso

    return {
        "id": a.id,
        "tool": a.tool,
        "defect": a.metadata.get("defect"),
        "says": a.metadata.get("says"),
        "copy_of": a.metadata.get("of"),
        "created_at": iso(a.created_at),
    }


def planted_row(view: ApprovalView) -> dict[str, object]:
    """A practice approval as the API lists it to an admin, in :func:`practice_row`'s shape."""
    planted = view.planted or {}
    return {
        "id": view.id,
        "tool": view.tool,
        "defect": planted.get("defect"),
        "says": planted.get("says"),
        "copy_of": planted.get("of"),
        "created_at": view.created_at,
    }


def _planted(body: object) -> list[dict[str, object]]:
    """The practice approvals waiting, as the API answered ``GET /practice``, in :func:`practice_row`'s shape."""
    from hitl.api.models import ApprovalList

    return [planted_row(a) for a in ApprovalList.model_validate(body).items]


def _scope(o: HaltOrder) -> str:
    from hitl.engine.domain.halts import EVERY_TOOL

    return "every tool" if o.scope == EVERY_TOOL else o.scope


def _order_json(o: HaltOrder) -> dict[str, object]:
    from hitl.api.models import iso

    return {"scope": o.scope, "by": o.by, "reason": o.reason, "at": iso(o.at)}


def _print_order(out: Out, verb: str, o: HaltOrder, *, resumed: int | None = None) -> None:
    from rich.text import Text

    if out.json:
        out.emit({"status": verb, "halt": _order_json(o), **({"resumed_runs": resumed} if resumed is not None else {})})
        return
    style = "bold red" if verb == "halted" else "bold green"
    out.text(
        (verb, style), f"  {_scope(o)}", ("  by ", "dim"), Text(o.by).plain, (f"  {o.reason}" if o.reason else "", "")
    )
    if resumed:
        out.text(("  · ", "dim"), f"{resumed} run(s) it paused went on; `hitl sessions list` shows where they stand")


@as_reviewer("list practice approvals", read_only=True, guard=_authorized)
def practice() -> Ways[Any]:
    """List the practice approvals still waiting (the admin role only).

    Each is a copy of a real approval with one planted defect (hitl.yaml oversight.practice); reviewers see it as any
    other, and are told once they decided it."""
    from rich.text import Text

    from hitl.engine.domain.practice import is_practice

    async def local(rt: Runtime, who: str) -> list[dict[str, object]]:
        from hitl.engine.storage.paging import every_pending  # here: through the API the command loads no store

        return [practice_row(a) async for a in every_pending(rt.store.approvals) if is_practice(a)]

    def show(out: Out, rows: list[dict[str, object]]) -> None:
        if out.json:
            out.emit({"practice": rows})
            return
        if not rows:
            out.text("no practice approval is waiting")
        for r in rows:
            out.text(
                (str(r["id"]), "bold"),
                f"  {r['tool']}  ",
                ("planted: ", "dim"),
                Text(str(r["says"])).plain,
                ("  copy of ", "dim"),
                str(r["copy_of"]),
            )

    return Ways(ApiCall("GET", "/practice", read=_planted), local, show)


@as_reviewer("see the figures per reviewer", read_only=True, guard=_authorized)
def reviewers(
    since: Annotated[str, typer.Option("--since", help="How far back: 24h, 7d, 30d.")] = "30d",
) -> Ways[Any]:
    """The oversight figures per reviewer (the admin role only).

    For each reviewer: decisions, corrections (modified or rejected), practice approvals caught and missed, spot
    checks answered and flagged. Read from the newest 10,000 approvals."""
    from rich.text import Text

    from hitl.api.models import iso
    from hitl.engine.domain.durations import parse_duration
    from hitl.engine.domain.reviewer_figures import by_reviewer

    try:
        window = parse_duration(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from None

    async def local(rt: Runtime, who: str) -> tuple[str, list[dict[str, Any]]]:
        from hitl.engine.storage.paging import recent_since  # here: through the API the command loads no store

        start = rt.clock.now() - window
        seen = await recent_since(rt.store.approvals, start - window)
        figures = by_reviewer(seen, since=start)
        return iso(start), [{**vars(f), "catch_rate": f.catch_rate, "audit_yield": f.audit_yield} for f in figures]

    def show(out: Out, answer: tuple[str, list[dict[str, Any]]]) -> None:
        start, listed = answer
        if out.json:
            out.emit({"since": start, "reviewers": listed})
            return
        if not listed:
            out.text("no decisions in this period")
            return
        headings = ("reviewer", "decided", "corr", "caught", "missed", "spot", "flag")
        counts = ("decisions", "corrections", "practice_caught", "practice_missed", "spot_checks", "spot_flags")
        rows: list[list[str | Text]] = [[Text(str(f["reviewer"])), *(str(f[name]) for name in counts)] for f in listed]
        out.table(headings, rows, right=headings[1:])

    return Ways(ApiCall("GET", "/reviewers", read=_figures, query={"since": since}), local, show)
