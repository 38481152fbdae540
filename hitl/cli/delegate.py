"""``hitl delegate give|end|list``: hand your reviewer roles to a colleague while you are away, end it, see what
concerns you. Against the store as a reviewer (``--as``), or through the API with a token (``HITL_API_URL`` and
``HITL_TOKEN``: the token says who delegates), which ``production: true`` requires."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.as_reviewer import ApiCall, Ways, as_reviewer
from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.engine.domain.delegation_bound import MAX_DAYS

if TYPE_CHECKING:
    from hitl.api.delegation_models import DelegationView
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import Runtime

__all__ = ["delegate_app"]

delegate_app = typer.Typer(
    cls=FlagGroup,
    help=f"Delegation: hand your reviewer roles to a colleague for at most {MAX_DAYS} days, end it, list it.",
    no_args_is_help=True,
)


def _show(out: Out, views: list[DelegationView]) -> None:
    from rich.text import Text

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
@as_reviewer("delegate give")
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
) -> Ways[Any]:
    """Hand your roles (or one) to a colleague until a date, audited; it is echoed back in UTC."""
    from hitl.api.delegation_models import DelegationView
    from hitl.engine.domain.delegation import parse_until, zone
    from hitl.engine.errors import InvalidInput

    def end() -> float:
        try:
            return parse_until(until, zone(tz))
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None

    async def local(rt: Runtime, who: str) -> DelegationView:
        service = rt.contexts.default.service
        me = (await service.reviewers.reviewer(who)).in_own_right()  # never what was handed to them
        return DelegationView.of(
            await service.delegations.give(me, to, until=end(), role=role, via="cli", rule=service.delegates)
        )

    def show(out: Out, given: DelegationView) -> None:
        if out.json:
            out.emit(given.model_dump())
        else:
            what = f"the role {given.role}" if given.role else "your roles"
            out.text(("delegated", "bold"), f"  {what} to {given.delegate} until {given.until} UTC  ({given.id})")

    # The date is read before the store is opened (a refused one creates nothing), and again where it is used.
    body = {"delegate": to, "until": until, "tz": tz, **({"role": role} if role else {})}
    return Ways(ApiCall("POST", "/delegations", read=DelegationView.model_validate, json=body), local, show, check=end)


@delegate_app.command("end", cls=FlagCommand)
@as_reviewer("delegate end")
def delegate_end(
    delegation: Annotated[
        str | None, typer.Argument(help="The delegation's id (default: the one you gave).", show_default=False)
    ] = None,
) -> Ways[Any]:
    """End a delegation you gave or were handed (audited): from now on neither acts for the other."""
    from hitl.api.delegation_models import DelegationView

    async def local(rt: Runtime, who: str) -> DelegationView:
        return DelegationView.of(await rt.contexts.default.service.delegations.end(who, delegation))

    def show(out: Out, ended: DelegationView) -> None:
        if out.json:
            out.emit(ended.model_dump())
        else:
            out.text(("ended", "bold"), f"  {ended.delegator}'s delegation to {ended.delegate}  ({ended.id})")

    body = {"id": delegation} if delegation else {}
    return Ways(ApiCall("POST", "/delegations/end", read=DelegationView.model_validate, json=body), local, show)


@delegate_app.command("list", cls=FlagCommand)
@as_reviewer("delegate list", read_only=True)
def delegate_list() -> Ways[Any]:
    """The delegations in force that you gave or were handed."""
    from hitl.api.delegation_models import DelegationList, DelegationView

    async def local(rt: Runtime, who: str) -> list[DelegationView]:
        given, received = await rt.contexts.default.service.delegations.of(who)
        return [DelegationView.of(d) for d in ([given] if given else []) + received]

    return Ways(
        ApiCall("GET", "/delegations", read=lambda body: DelegationList.model_validate(body).delegations), local, _show
    )
