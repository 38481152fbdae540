"""``hitl token new``: an API token for ``hitl serve``'s HTTP API, printed once, and the entry (only its hash) to
paste under ``api.tokens`` in hitl.yaml."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.options import JsonOpt

__all__ = ["token_app"]


token_app = typer.Typer(cls=FlagGroup, help="API tokens for `hitl serve`'s HTTP API.", no_args_is_help=True)


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
