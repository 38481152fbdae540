"""The ``hitl`` command (Typer). Contract: ../shared/DESIGN.md (exit codes 0/1/2/3/4, --json)."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.answer import answer
from hitl.cli.delegate import delegate_app
from hitl.cli.evidence import evidence
from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.keys import keys_app
from hitl.cli.loading import loading
from hitl.cli.migrate import migrate
from hitl.cli.options import NO_CONFIG, AsOpt, ConfigOpt, JsonOpt, Order, StoreOpt
from hitl.cli.oversight import halt, halts, practice, reviewers, unhalt
from hitl.cli.purge import purge
from hitl.cli.sessions import sessions_app
from hitl.cli.setup import demo, init, mcp, serve
from hitl.cli.stats import stats
from hitl.cli.trust import trust_app
from hitl.cli.withdraw import withdraw

# A command imports what it uses when it runs (`hitl --help` loads no store, engine or server): the names below are
# for the type checker only.
if TYPE_CHECKING:
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.domain.models import DecisionKind
    from hitl.engine.domain.runs import RunResult
    from hitl.engine.runtime.process import Runtime
    from hitl.engine.workflow.definition import LoadedWorkflow

__all__ = ["app", "main"]

EXIT_CODES = (
    "Exit codes: 0 completed, 1 error, 2 usage error, 3 stopped by a decision (rejected, cancelled, expired), "
    "4 paused waiting for approval."
)

# Commands grouped as a person looks for them in `hitl --help`.
RUNS = "Run workflows"
REVIEW = "Review and decide"
OVERSIGHT = "Oversight"
SETUP = "Serve and set up"

app = typer.Typer(
    cls=FlagGroup,
    name="hitl",
    help="Human approval gates for AI agents and workflows.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("hitl-gate")  # the distribution; the command is `hitl`
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown (not installed)"
        typer.echo(f"hitl {number}")
        raise typer.Exit(0)


@app.callback()
def _main(
    _: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Human approval gates for AI agents and workflows."""
    # A short command's warnings (a store that could not take its last metric counts, say) read like its own
    # `warning: ...` lines, not as bare text; the long-running commands configure logging of their own.
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(_OneLine())
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)


class _OneLine(logging.Formatter):
    """``warning: message`` (``error: ...``), as the command's own lines read."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


async def _deciding_roles(rt: Runtime, result: RunResult, wf: LoadedWorkflow | None = None) -> dict[str, list[str]]:
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


policy_app = typer.Typer(cls=FlagGroup, help="Inspect the policy.", no_args_is_help=True)


def _parse_vars(pairs: list[str], *, option: str = "--var", json_values: bool = False) -> dict[str, Any]:
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


def _confirmed(pairs: list[str]) -> dict[str, str] | None:
    """``--confirm NAME=VALUE`` pairs: the values a reviewer typed, as text (compared by the engine)."""
    return _parse_vars(pairs, option="--confirm") or None


@app.command(cls=FlagCommand, rich_help_panel=RUNS)
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
    given = _parse_vars(var or [])
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
            out.run_result(result, await _deciding_roles(rt, result, wf), view)
            return result.exit_code

    run_command(out, work)


@app.command(cls=FlagCommand, rich_help_panel=RUNS)
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
        edited = {**(edited or {}), **_parse_vars(set_, option="--set", json_values=True)}
    return edited


@app.command(cls=FlagCommand, rich_help_panel=RUNS)
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
    overrides = _parse_vars(var or [])
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
        roles = await _deciding_roles(rt, result)
        view = await approval_view(rt, result.approval) if result.approval is not None else None
    if kind is not None and result.approval is not None and view is not None and "step" not in result.approval.metadata:
        out.agent_decision(view, result.history)  # no run of ours: only the decision was taken
    else:
        out.run_result(result, roles, view)
    return result.exit_code


@app.command(cls=FlagCommand, rich_help_panel=REVIEW)
def pending(
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
    reviewer: AsOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many.")] = 50,
    order: Annotated[
        Order,
        typer.Option(
            help="rank: the most important first (tier, how far over its threshold, time left); age: oldest first."
        ),
    ] = Order.RANK,
) -> None:
    """List pending approvals, the most important first (only those the reviewer may decide, with --as)."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import approval_view
    from hitl.cli.output import Out
    from hitl.cli.remote import connect
    from hitl.engine.domain.ranking import PendingOrder, why_ranked
    from hitl.engine.errors import InvalidInput

    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)
    sort: PendingOrder = "age" if order is Order.AGE else "rank"

    async def work() -> int:
        client = await connect(settings.reviewer)
        if client is not None:  # the token says who is asking: the approvals it may decide
            listed = await client.pending(limit=limit, order=sort)
            out.pending(listed.items, waiting=listed.waiting)
            return 0
        from hitl.engine.runtime.process import open_runtime
        from hitl.engine.storage.queue import queue_page

        async with open_runtime(settings.runtime, read_only=True) as rt:
            context = rt.contexts.default
            roles = None
            if context.config_path is None:
                out.warn(NO_CONFIG)
            if settings.reviewer:
                roles = sorted((await context.service.reviewers.reviewer(settings.reviewer)).roles)
                if not roles and settings.reviewer != context.service.requester:  # a typo is not "nothing for you"
                    known = ", ".join(sorted(context.config.roles)) or "none"
                    raise InvalidInput(
                        f"{settings.reviewer!r} is in no role of {context.config_path or 'the default config'} "
                        f"(roles: {known}); check --as / HITL_REVIEWER",
                        reviewer=settings.reviewer,
                    )
            approvals = rt.store.approvals
            mine = settings.reviewer
            now = rt.contexts.clock.now()
            if sort == "rank":  # as a person meets it now: every one due soon first, wherever the rank puts it
                page = await queue_page(approvals, now=now, roles=roles, exclude_requester=mine, limit=limit)
            else:
                page = await approvals.list_pending(
                    roles=roles, exclude_requester=mine, limit=limit, order=sort, now=now
                )
            views = []
            for a in page.items:
                view = await approval_view(rt, a)
                views.append(view.model_copy(update={"ranked": why_ranked(a, now=now)}) if sort == "rank" else view)
            waiting = await approvals.count_pending(roles=roles, exclude_requester=mine, now=now) if roles else None
            out.pending(views, waiting=waiting)
        return 0

    run_command(out, work)


@app.command(cls=FlagCommand, rich_help_panel=REVIEW)
def show(
    targets: Annotated[
        list[str],
        typer.Argument(metavar="ID...", help="One approval or more (each an id, a unique prefix or a session)."),
    ],
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Show one approval or several, one after another (or the approval a session is waiting on), in the words of
    `--config`'s hitl.yaml."""
    from hitl.api.models import AuditView
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import approval_view, resolve_target
    from hitl.cli.output import Out, approval_json
    from hitl.cli.remote import connect
    from hitl.mail.states import DELIVERY_EVENTS

    if as_json and len(targets) > 1:
        raise typer.BadParameter("--json shows one approval: run `hitl show ID --json` for each", param_hint="ID")
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=None)

    async def work() -> int:
        client = await connect(None)
        if client is not None:
            views = [await client.approval(target) for target in targets]  # all found before any is printed
            for view in views:
                out.emit(approval_json(view.model_copy(update={"audit": None}))) if out.json else out.approval(view)
            return 0
        from hitl.engine.runtime.process import open_runtime

        async with open_runtime(settings.runtime, read_only=True) as rt:
            views = [await approval_view(rt, (await resolve_target(rt, target))[0]) for target in targets]
            for view in views:
                if out.json:
                    out.emit(approval_json(view))
                else:  # with how it reached people (e-mail, the page opened) and its withdrawal, from its trail
                    trail = [AuditView.of(e) for e in await rt.store.audit.entries(approval_id=view.id)]
                    told = [e for e in trail if e.event in DELIVERY_EVENTS or e.event == "withdrawn"]
                    out.approval(view.model_copy(update={"audit": told}))
        return 0

    run_command(out, work)


@app.command(cls=FlagCommand, rich_help_panel=REVIEW)
def audit(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="ID|verify|head|show",
            help="Only this approval; `verify` to check the chains and their heads; `head` to take a digest to keep; "
            "`show ID` for the view each decider saw.",
        ),
    ] = None,
    approval: Annotated[
        str | None, typer.Argument(metavar="ID", help="With show: the approval (its id or a unique prefix).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=100000, help="Newest entries to print.")] = 200,
    head: Annotated[
        str | None, typer.Option("--head", help="With verify: a digest `hitl audit head` printed earlier.")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="With show: each card's digest and the renderer that drew it.")
    ] = False,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Print the audit trail (oldest first), check it (verify), anchor it (head) or show what deciders saw (show).

    `hitl audit verify`: check that no entry was changed, removed or reordered and that no chain lost its newest
    entries (exit 0 intact, 1 broken, naming the first break). `hitl audit head`: record every chain's head and print
    one digest to keep outside the store, which `hitl audit verify --head DIGEST` later checks (every entry recorded
    before it is still there, unchanged). `hitl audit show ID`: each decision on the approval, its reason, and the card
    its decider was shown, as the audit keeps it, checked against its digest (exit 1 when one does not match;
    `--verbose` prints the digests)."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import resolve_target
    from hitl.cli.output import Out
    from hitl.cli.remote import connect
    from hitl.engine.errors import InvalidInput

    out = Out(as_json=as_json)
    if head is not None and target != "verify":
        raise typer.BadParameter("--head goes with `hitl audit verify`", param_hint="--head")
    if verbose and target != "show":
        raise typer.BadParameter("--verbose goes with `hitl audit show ID`", param_hint="--verbose")
    if (target == "show") != (approval is not None):
        raise typer.BadParameter(
            "`hitl audit show ID` names one approval; type `hitl audit show apr_...`"
            if target == "show"
            else f"one target at a time: `hitl audit {target}`, or `hitl audit show {approval}`",
            param_hint="ID",
        )
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        client = await connect(None)
        if client is not None:
            if target in ("verify", "head"):
                raise InvalidInput(f"`hitl audit {target}` reads the store itself: run it where HITL_STORE reaches")
            if approval is not None:
                shown = await client.approval(approval)
                trail = list(shown.audit or [])[-limit:]
                return 0 if out.seen(shown.id, trail, shown.decisions, verbose=verbose) else 1
            out.audit(await client.audit(target, limit=limit))
            return 0
        from hitl.engine.runtime.process import open_runtime

        async with open_runtime(settings.runtime, read_only=target != "head") as rt:
            if target == "verify":
                checked, broken = await rt.store.audit.verify(head=head)
                out.audit_verified(checked, broken)
                return 0 if broken is None else 1
            if target == "head":
                digest = await rt.store.audit.take_head()
                if out.json:
                    out.emit({"head": digest})
                else:
                    out.text(("audit head", "bold"), f" {digest}")
                    out.text("keep it outside the store; later: ", (f"hitl audit verify --head {digest}", "bold"))
                return 0
            if approval is not None:
                found = (await resolve_target(rt, approval))[0]
                kept = await rt.store.audit.entries(approval_id=found.id, limit=limit)
                return 0 if out.seen(found.id, kept, found.decisions, verbose=verbose) else 1
            approval_id = (await resolve_target(rt, target))[0].id if target else None
            out.audit(await rt.store.audit.entries(approval_id=approval_id, limit=limit))
        return 0

    run_command(out, work)


@app.command(cls=FlagCommand, rich_help_panel=RUNS)
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


@policy_app.command("explain", cls=FlagCommand)
def policy_explain(
    tool: Annotated[str, typer.Argument(help="The tool's name, as agents call it.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as JSON.")] = "{}",
    session: Annotated[str, typer.Option("--session", help="Judge as in this session (its trust grants).")] = "",
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Show the tier, approver role, quorum and every rule that fires for TOOL with ARGS."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import open_runtime

    out = Out(as_json=as_json)
    try:
        parsed = json.loads(args)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc.msg}", param_hint="--args") from None
    settings = CliSettings.resolve(store=store, config=config, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime) as rt:
            if rt.contexts.default.config_path is None:
                out.warn(NO_CONFIG)
            for _, message in rt.contexts.default.config.quorum_problems():
                out.warn(message)
            v = await rt.contexts.default.service.explain(tool, parsed, session_id=session)
        if out.json:
            out.emit(
                {
                    "tool": tool,
                    "tier": str(v.tier),
                    "denied": v.denied,
                    "required_role": v.required_role,
                    "quorum": v.quorum,
                    "trustable": v.trustable,
                    "rule": v.rule,
                    "fired": [{"rule": f.rule, "tier": str(f.tier), "reason": f.reason} for f in v.fired],
                }
            )
        else:
            out.text(v.explain(), wrap=True)
        return 0

    run_command(out, work)


# Registered here, so `hitl --help` lists them where a day's work needs them.
for _command in (serve, mcp, init, demo):
    app.command(cls=FlagCommand, rich_help_panel=SETUP)(_command)


_USAGE_ERROR: type[typer.BadParameter] = typer.BadParameter.__mro__[1]
"""Click's ``UsageError`` (as Typer ships it): the base of every usage error, a bad parameter among them."""
assert _USAGE_ERROR.__name__ == "UsageError"


# Registered after the commands above, so `hitl --help` lists its panels in the order of a day's work.
app.add_typer(policy_app, name="policy", rich_help_panel=SETUP)
token_app = typer.Typer(cls=FlagGroup, help="API tokens for `hitl serve`'s HTTP API.", no_args_is_help=True)
app.add_typer(token_app, name="token", rich_help_panel=SETUP)
app.add_typer(keys_app, name="keys", rich_help_panel=SETUP)
app.add_typer(sessions_app, name="sessions", rich_help_panel=RUNS)
app.add_typer(trust_app, name="trust", rich_help_panel=OVERSIGHT)
app.add_typer(delegate_app, name="delegate", rich_help_panel=OVERSIGHT)
app.command(cls=FlagCommand, rich_help_panel=REVIEW)(withdraw)
app.command(cls=FlagCommand, rich_help_panel=REVIEW)(answer)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(evidence)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(stats)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(reviewers)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(halt)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(unhalt)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(halts)
app.command(cls=FlagCommand, rich_help_panel=OVERSIGHT)(practice)
app.command(cls=FlagCommand, rich_help_panel=SETUP)(purge)
app.command(cls=FlagCommand, rich_help_panel=SETUP)(migrate)


def main() -> None:
    """The ``hitl`` command. A usage error is one line, like every other error (``error: ... [usage]``, exit 2),
    not Click's boxed panel."""
    loading()  # the collector runs rarely until the command's work begins (hitl/cli/loading.py)
    try:
        code = app(standalone_mode=False)
    except _USAGE_ERROR as exc:
        names: list[str] = []
        ctx = exc.ctx
        while ctx is not None and ctx.parent is not None:  # the subcommand's path, whatever the program is called
            names.insert(0, str(ctx.info_name))
            ctx = ctx.parent
        command = " ".join(["hitl", *names])
        what = exc.format_message().strip()
        if not what:  # a group run without its subcommand: its help was shown; say what to type
            subcommands = sorted(getattr(exc.ctx.command, "commands", {}) if exc.ctx is not None else {})
            what = f"`{command}` needs a command: {', '.join(f'`{command} {c}`' for c in subcommands)}"
        from hitl.cli.output import Out

        Out(as_json=False).error("usage", f"{what} (see `{command} --help`)")
        raise SystemExit(2) from None
    except typer.Abort:
        raise SystemExit(130) from None
    raise SystemExit(code if isinstance(code, int) else 0)


@token_app.command("new", cls=FlagCommand)
def token_new(
    name: Annotated[str, typer.Option("--name", help="A label for logs and the audit trail (api:<name>).")],
    reviewer: Annotated[str, typer.Option("--as", help="The reviewer id the token acts as (the ids roles list).")],
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            help="read, decide, propose, run, redeem (a protected system spending receipts), claim, evaluate (a "
            "gateway asking AuthZEN evaluations; add its subjects: in hitl.yaml) or admin (repeatable).",
        ),
    ],
    role: Annotated[list[str] | None, typer.Option("--role", help="Decide only with these roles.")] = None,
    tool: Annotated[list[str] | None, typer.Option("--tool", help="See and decide only these tools.")] = None,
    audience: Annotated[
        str | None,
        typer.Option(
            "--audience",
            help="With --scope redeem: the protected system the token speaks for; it spends only receipts whose "
            "aud names it (receipts.tools.<tool>.audience).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Make an API token: prints it once, and the entry to paste under api.tokens in hitl.yaml (only its hash)."""
    from pydantic import ValidationError

    from hitl.api import mint_token, token_hash
    from hitl.cli.output import Out
    from hitl.engine.config.api import ApiTokenSpec, Scope

    out = Out(as_json=as_json)
    try:
        spec = ApiTokenSpec(
            name=name, sha256="0" * 64, reviewer=reviewer, scopes=scope, roles=role, tools=tool, audience=audience
        )
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(str(e["msg"]) for e in exc.errors())) from None
    if audience is not None and not spec.may(Scope.REDEEM):
        # An audience only narrows what a token may spend: on a token that spends nothing it would mean nothing.
        raise typer.BadParameter(
            "--audience is for a token that spends receipts: add --scope redeem", param_hint="--audience"
        )
    token = mint_token()
    entry = spec.model_copy(update={"sha256": token_hash(token)}).model_dump(mode="json", exclude_none=True)
    if out.json:
        out.emit({"token": token, "entry": entry})
        return
    out.text(("token (shown once; give it to its holder, keep it out of hitl.yaml):", "bold"))
    out.text(token)
    out.text(("add under api.tokens in hitl.yaml:", "bold"))
    # Block style, a key a line: the hash's line fits 80 columns, and the entry pastes as it is.
    for i, (key, value) in enumerate(entry.items()):
        out.text(f"    {'- ' if i == 0 else '  '}{key}: {json.dumps(value)}")
