"""``hitl trust list`` and ``hitl trust revoke``: the trust grants in force (each covers one tool, for one requester,
in one session), and ending them. Against the store as a reviewer (``--as``), or through the API with a token
(``HITL_API_URL`` and ``HITL_TOKEN``), which ``production: true`` requires."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.text import Text

from hitl.api.models import TrustList, TrustRevoked, TrustView
from hitl.cli.command import run_command
from hitl.cli.context import CliSettings
from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.flows import refuse_claimed_in_production
from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt
from hitl.cli.output import Out
from hitl.cli.remote import remote_from_env
from hitl.engine.errors import DecisionRefused, ErrorCode, NotFound
from hitl.engine.runtime.process import Runtime, open_runtime

__all__ = ["trust_app"]

trust_app = typer.Typer(
    cls=FlagGroup,
    help="Trust grants: which tools run without review, for whom, in which session.",
    no_args_is_help=True,
)

SessionOpt = Annotated[str, typer.Option("--session", help="The session the grant is in.", metavar="SESSION")]


async def _decides(rt: Runtime, who: str) -> Callable[[str], bool]:
    """Whether ``who`` may decide a tool (their roles read once): whose grants they may see and end."""
    roles = (await rt.contexts.default.service.reviewers.reviewer(who)).roles
    config = rt.contexts.default.config
    return lambda tool: config.may_decide_tool(roles, tool)


@trust_app.command("list", cls=FlagCommand)
def trust_list(
    reviewer: AsOpt = None, as_json: JsonOpt = False, store: StoreOpt = None, config: ConfigOpt = None
) -> None:
    """List the grants in force of the tools you may decide."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        client = remote_from_env()
        if client is not None:
            grants = TrustList.model_validate(await client.call("GET", "/trust")).grants
        else:
            who = settings.require_reviewer()
            async with open_runtime(settings.runtime, read_only=True) as rt:
                await refuse_claimed_in_production(rt, who, "trust list")
                decides = await _decides(rt, who)
                grants = [
                    TrustView.of(g) for g in await rt.store.trust.all_active(now=rt.clock.now()) if decides(g.tool)
                ]
        if out.json:
            out.emit({"grants": [g.model_dump() for g in grants]})
            return 0
        if not grants:
            out.text("no tool you review is trusted right now")
            return 0
        out.table(
            ("tool", "requester", "session", "by", "until"),
            [(Text(g.tool), Text(g.requester), Text(g.session_id), Text(g.granted_by), g.until) for g in grants],
        )
        return 0

    run_command(out, work)


@trust_app.command("revoke", cls=FlagCommand)
def trust_revoke(
    tool: Annotated[str, typer.Argument(help="The trusted tool.")],
    session: SessionOpt,
    requester: Annotated[
        str | None, typer.Option("--requester", help="Only this requester's grant (default: every requester's).")
    ] = None,
    reviewer: AsOpt = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """End the trust in a tool in a session (audited): its next call is asked about again."""
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)

    async def work() -> int:
        client = remote_from_env()
        if client is not None:
            query = {"session": session, "tool": tool, **({"requester": requester} if requester else {})}
            revoked = TrustRevoked.model_validate(await client.call("DELETE", "/trust", query=query)).revoked
        else:
            who = settings.require_reviewer()
            async with open_runtime(settings.runtime, kind="cli") as rt:
                await refuse_claimed_in_production(rt, who, "trust revoke")
                if not (await _decides(rt, who))(tool):
                    raise DecisionRefused(
                        f"{who} may not decide {tool}, so may not end its trust", code=ErrorCode.NOT_ELIGIBLE
                    )
                revoked = await rt.store.trust.revoke(session, tool, requester=requester, by=who, now=rt.clock.now())
            if not revoked:
                raise NotFound(f"{tool} is not trusted in session {session}; `hitl trust list` lists the grants")
        if out.json:
            out.emit({"revoked": revoked})
            return 0
        out.text(("revoked", "bold"), f"  {tool} in {session}", ("  ·  ", "dim"), f"{revoked} grant(s) ended")
        return 0

    run_command(out, work)
