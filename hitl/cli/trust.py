"""``hitl trust list`` and ``hitl trust revoke``: the trust grants in force (each covers one tool, for one requester,
in one session), and ending them. Against the store as a reviewer (``--as``), or through the API with a token
(``HITL_API_URL`` and ``HITL_TOKEN``), which ``production: true`` requires."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.as_reviewer import ApiCall, Ways, as_reviewer
from hitl.cli.flags import FlagCommand, FlagGroup

if TYPE_CHECKING:
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import Runtime

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
@as_reviewer("trust list", read_only=True)
def trust_list() -> Ways[Any]:
    """List the grants in force of the tools you may decide."""
    from rich.text import Text

    from hitl.api.trust_models import TrustList, TrustView

    async def local(rt: Runtime, who: str) -> list[TrustView]:
        decides = await _decides(rt, who)
        return [TrustView.of(g) for g in await rt.store.trust.all_active(now=rt.clock.now()) if decides(g.tool)]

    def show(out: Out, grants: list[TrustView]) -> None:
        if out.json:
            out.emit({"grants": [g.model_dump() for g in grants]})
        elif not grants:
            out.text("no tool you review is trusted right now")
        else:
            out.table(
                ("tool", "requester", "session", "by", "until"),
                [(Text(g.tool), Text(g.requester), Text(g.session_id), Text(g.granted_by), g.until) for g in grants],
            )

    return Ways(ApiCall("GET", "/trust", read=lambda body: TrustList.model_validate(body).grants), local, show)


@trust_app.command("revoke", cls=FlagCommand)
@as_reviewer("trust revoke")
def trust_revoke(
    tool: Annotated[str, typer.Argument(help="The trusted tool.")],
    session: SessionOpt,
    requester: Annotated[
        str | None, typer.Option("--requester", help="Only this requester's grant (default: every requester's).")
    ] = None,
) -> Ways[Any]:
    """End the trust in a tool in a session (audited): its next call is asked about again."""
    from hitl.api.trust_models import TrustRevoked
    from hitl.engine.errors import DecisionRefused, ErrorCode, NotFound

    query = {"session": session, "tool": tool, **({"requester": requester} if requester else {})}

    async def local(rt: Runtime, who: str) -> int:
        if not (await _decides(rt, who))(tool):
            raise DecisionRefused(f"{who} may not decide {tool}, so may not end its trust", code=ErrorCode.NOT_ELIGIBLE)
        revoked = await rt.store.trust.revoke(session, tool, requester=requester, by=who, now=rt.clock.now())
        if not revoked:
            raise NotFound(f"{tool} is not trusted in session {session}; `hitl trust list` lists the grants")
        return revoked

    def show(out: Out, revoked: int) -> None:
        if out.json:
            out.emit({"revoked": revoked})
        else:
            out.text(("revoked", "bold"), f"  {tool} in {session}", ("  ·  ", "dim"), f"{revoked} grant(s) ended")

    remote = ApiCall("DELETE", "/trust", read=lambda body: TrustRevoked.model_validate(body).revoked, query=query)
    return Ways(remote, local, show)
