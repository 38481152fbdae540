"""``hitl resume ID``: decide a paused approval and continue its run (or just continue a run), through ``hitl
serve``'s API with a token (``HITL_API_URL`` and ``HITL_TOKEN``) or against the store; several IDs with ``--approve``
or ``--reject`` decide them together. The one decide path of the CLI: ``hitl answer`` is a ``--modify`` said
plainly."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt
from hitl.cli.runs import deciding_roles, parse_vars

# A command imports what it uses when it runs (`hitl --help` loads no store, engine or server): the names below are
# for the type checker only.
if TYPE_CHECKING:
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.domain.models import DecisionKind

__all__ = ["resume"]


def _confirmed(pairs: list[str]) -> dict[str, str] | None:
    """``--confirm NAME=VALUE`` pairs: the values a reviewer typed, as text (compared by the engine)."""
    return parse_vars(pairs, option="--confirm") or None


def _chosen_decision(**chosen: bool) -> DecisionKind | None:
    """The one decision the options name (None: just continue the run); two are refused."""
    from hitl.engine.domain.models import DecisionKind

    on = [name for name, given in chosen.items() if given]
    if len(on) > 1:
        raise typer.BadParameter(f"choose one decision, not {' and '.join(on)}")
    return DecisionKind(on[0]) if on else None


def _check_group(kind: DecisionKind | None, *, confirm: bool, var: bool, force: bool) -> None:
    """Refuse what several IDs cannot be given together (before anything is read or recorded)."""
    from hitl.engine.domain.models import DecisionKind

    if kind not in (DecisionKind.APPROVE, DecisionKind.REJECT):
        raise typer.BadParameter(
            "several approvals are approved or rejected together: add --approve or --reject (modify, trust and "
            "feedback are decided one approval at a time)"
        )
    given = [name for name, on in (("--confirm", confirm), ("--var", var), ("--force", force)) if on]
    if given:
        raise typer.BadParameter(
            f"{', '.join(given)} applies to one approval or run: decide that one on its own (hitl resume ID ...)"
        )


async def _group_work(
    out: Out, settings: CliSettings, targets: list[str], kind: DecisionKind, *, reason: str | None
) -> int:
    """``hitl resume ID ID ...``: through the API when it is configured, else against the store."""
    from hitl.cli.groups import decide_group_locally, group_exit_code
    from hitl.cli.remote import connect

    client = await connect(settings.reviewer)
    if client is not None:
        view = await client.decide_group(targets, kind, reason=reason)
    else:
        from hitl.engine.runtime.process import open_runtime

        async with open_runtime(settings.runtime, kind="cli") as rt:
            view = await decide_group_locally(rt, settings, targets, kind, reason=reason)
    out.group_decision(view)
    return group_exit_code(view)


def _edit_of(args: str | None, set_: list[str] | None, *, modify: bool) -> dict[str, Any] | None:
    """The edit ``--args`` and ``--set`` give together (``--set`` wins per field), checked against ``--modify``."""
    if modify and not args and not set_:
        raise typer.BadParameter("--modify needs the edit: --set KEY=VALUE or --args JSON", param_hint="--set")
    if (args or set_) and not modify:
        raise typer.BadParameter("--args and --set edit arguments: add --modify", param_hint="--modify")
    edited: dict[str, Any] | None = None
    if args is not None:
        try:
            edited = json.loads(args)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not valid JSON: {exc.msg}", param_hint="--args") from None
        if not isinstance(edited, dict):
            raise typer.BadParameter("must be a JSON object", param_hint="--args")
    if set_:
        edited = {**(edited or {}), **parse_vars(set_, option="--set", json_values=True)}
    return edited


def resume(
    targets: Annotated[
        list[str],
        typer.Argument(
            metavar="ID...",
            help="Approval id (apr_…) or session id (ses_…); several, to approve or reject them together.",
        ),
    ],
    approve: Annotated[bool, typer.Option("--approve", help="Approve the action as it is.")] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="Reject it (give --reason; some tools require one).")
    ] = False,
    modify: Annotated[
        bool, typer.Option("--modify", help="Approve edited arguments (with --set KEY=VALUE or --args JSON).")
    ] = False,
    trust: Annotated[bool, typer.Option("--trust", help="Approve and trust this tool for the session.")] = False,
    feedback: Annotated[str | None, typer.Option("--feedback", help="Re-run the previous step with this text.")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why: shown to the requester and audited.")] = None,
    confirm: Annotated[
        list[str] | None,
        typer.Option(
            "--confirm",
            help="NAME=VALUE (repeatable): an argument the policy asks you to type to approve, as you read it.",
        ),
    ] = None,
    args: Annotated[
        str | None, typer.Option("--args", help="The edit as a JSON object: fields left out keep their values.")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE (repeatable): one field of the edit; VALUE is JSON or text."),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="With --modify: --args replaces the arguments whole.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Resume even if the workflow file changed.")] = False,
    var: Annotated[
        list[str] | None, typer.Option("--var", help="KEY=VALUE: a new value for the steps still to come.")
    ] = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
    reviewer: AsOpt = None,
) -> None:
    """Decide a paused approval and continue its run (or just continue a run).

    Several IDs with --approve or --reject decide them together: each under its own rules, each outcome printed.
    With HITL_API_URL and HITL_TOKEN set, the decision goes through `hitl serve`'s API, as the token's reviewer."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out

    out = Out(as_json=as_json)
    kind = _chosen_decision(approve=approve, reject=reject, modify=modify, trust=trust, feedback=feedback is not None)
    edited = _edit_of(args, set_, modify=modify)
    if len(targets) > 1:
        _check_group(kind, confirm=bool(confirm), var=bool(var), force=force)
        assert kind is not None  # checked just above
        group = CliSettings.resolve(store=store, config=config, reviewer=reviewer)
        run_command(out, lambda: _group_work(out, group, targets, kind, reason=reason))
        return
    overrides = parse_vars(var or [])
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)
    why, typed = feedback if feedback is not None else reason, _confirmed(confirm or [])
    run_command(
        out,
        lambda: _resume_one(
            out,
            settings,
            targets[0],
            kind,
            reason=why,
            confirm=typed,
            args=edited,
            overrides=overrides,
            force=force,
            replace_args=replace,
        ),
    )


async def _resume_one(
    out: Out,
    settings: CliSettings,
    target: str,
    kind: DecisionKind | None,
    *,
    reason: str | None,
    confirm: dict[str, str] | None,
    args: dict[str, Any] | None,
    overrides: dict[str, Any],
    force: bool,
    replace_args: bool,
) -> int:
    """``hitl resume ID``: through ``hitl serve``'s API when it is configured, else on the store itself (decide,
    continue the run, say how it went); returns the exit code."""
    from hitl.cli.flows import approval_view, decide_and_resume, remote_resume
    from hitl.cli.remote import connect

    how: dict[str, Any] = dict(
        reason=reason, confirm=confirm, args=args, overrides=overrides, force=force, replace_args=replace_args
    )
    client = await connect(settings.reviewer)
    if client is not None:
        return await remote_resume(client, out, target, kind, **how)
    # Imported only here, as in every command that may go through the API: through it, no store, runtime or
    # workflow is loaded (tests/cli/test_startup.py).
    from hitl.engine.runtime.process import open_runtime

    async with open_runtime(settings.runtime, kind="cli") as rt:
        result = await decide_and_resume(rt, settings, target, kind, **how)
        roles = await deciding_roles(rt, result)
        view = await approval_view(rt, result.approval) if result.approval is not None else None
    if kind is not None and result.approval is not None and view is not None and "step" not in result.approval.metadata:
        out.agent_decision(view, result.history)  # no run of ours: only the decision was taken
    else:
        out.run_result(result, roles, view)
    return result.exit_code
