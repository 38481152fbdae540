"""``hitl delegate give|end|list``: hand your reviewer roles to a colleague while you are away, end it, see what
concerns you. Against the store as a reviewer (``--as``), or through the API with a token (``HITL_API_URL`` and
``HITL_TOKEN``: the token says who delegates), which ``production: true`` requires."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from hitl.api.models import DelegationList, DelegationView
from hitl.cli.command import run_command
from hitl.cli.context import CliSettings
from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.flows import refuse_claimed_in_production
from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt
from hitl.cli.output import Out
from hitl.cli.remote import remote_from_env
from hitl.engine.domain.delegation import MAX_DAYS, parse_until, zone
from hitl.engine.errors import InvalidInput
from hitl.engine.runtime.process import open_runtime

__all__ = ["delegate_app"]

delegate_app = typer.Typer(
    cls=FlagGroup,
    help=f"Delegation: hand your reviewer roles to a colleague for at most {MAX_DAYS} days, end it, list it.",
    no_args_is_help=True,
)


def _show(out: Out, views: list[DelegationView]) -> None:
    if out.json:
        out.emit({"delegations": [v.model_dump() for v in views]})
        return
    if not views:
        out.text("no delegation in force concerns you")
        return
    out.table(
        ("id", "from", "to", "role", "until (UTC)"),
        [(v.id, Text(v.delegator), Text(v.delegate), Text(v.role or "all their roles"), v.until) for v in views],
    )


@delegate_app.command("give", cls=FlagCommand)
def delegate_give(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="Who acts for you: a reviewer id hitl.yaml's roles list (e.g. U024BE7LH), or, through hitl serve, an "
            "active person of its Slack workspace.",
        ),
    ],
    until: Annotated[
        str,
        typer.Option(
            "--until", help="YYYY-MM-DD (to the end of that day), YYYY-MM-DD HH:MM, or ISO 8601 with an offset."
        ),
    ],
    role: Annotated[str | None, typer.Option("--role", help="Only this role (default: every role you hold).")] = None,
    tz: Annotated[str, typer.Option("--tz", help="The time zone --until is read in (IANA).")] = "UTC",
    reviewer: AsOpt = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Hand your roles (or one) to a colleague until a date, audited; it is echoed back in UTC."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        client = remote_from_env()
        if client is not None:
            body = {"delegate": to, "until": until, "tz": tz, **({"role": role} if role else {})}
            given = DelegationView.model_validate(await client.call("POST", "/delegations", json=body))
        else:
            who = settings.require_reviewer()
            try:
                end = parse_until(until, zone(tz))
            except ValueError as exc:
                raise InvalidInput(str(exc)) from None
            async with open_runtime(settings.runtime, kind="cli") as rt:
                await refuse_claimed_in_production(rt, who, "delegate give")
                service = rt.contexts.default.service
                me = (await service.reviewers.reviewer(who)).in_own_right()  # never what was handed to them
                given = DelegationView.of(
                    await service.delegations.give(me, to, until=end, role=role, via="cli", rule=service.delegates)
                )
        if out.json:
            out.emit(given.model_dump())
            return 0
        what = f"the role {given.role}" if given.role else "your roles"
        out.text(("delegated", "bold"), f"  {what} to {given.delegate} until {given.until} UTC  ({given.id})")
        return 0

    run_command(out, work)


@delegate_app.command("end", cls=FlagCommand)
def delegate_end(
    delegation: Annotated[
        str | None, typer.Argument(help="The delegation's id (default: the one you gave).", show_default=False)
    ] = None,
    reviewer: AsOpt = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """End a delegation you gave or were handed (audited): from now on neither acts for the other."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        client = remote_from_env()
        if client is not None:
            body = {"id": delegation} if delegation else {}
            ended = DelegationView.model_validate(await client.call("POST", "/delegations/end", json=body))
        else:
            who = settings.require_reviewer()
            async with open_runtime(settings.runtime, kind="cli") as rt:
                await refuse_claimed_in_production(rt, who, "delegate end")
                ended = DelegationView.of(await rt.contexts.default.service.delegations.end(who, delegation))
        if out.json:
            out.emit(ended.model_dump())
            return 0
        out.text(("ended", "bold"), f"  {ended.delegator}'s delegation to {ended.delegate}  ({ended.id})")
        return 0

    run_command(out, work)


@delegate_app.command("list", cls=FlagCommand)
def delegate_list(
    reviewer: AsOpt = None, as_json: JsonOpt = False, store: StoreOpt = None, config: ConfigOpt = None
) -> None:
    """The delegations in force that you gave or were handed."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        client = remote_from_env()
        if client is not None:
            views = DelegationList.model_validate(await client.call("GET", "/delegations")).delegations
        else:
            who = settings.require_reviewer()
            async with open_runtime(settings.runtime, read_only=True) as rt:
                await refuse_claimed_in_production(rt, who, "delegate list")
                given, received = await rt.contexts.default.service.delegations.of(who)
                views = [DelegationView.of(d) for d in ([given] if given else []) + received]
        _show(out, views)
        return 0

    run_command(out, work)
