"""``hitl policy explain``: what the policy decides for a tool call, and every rule that fires."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.options import NO_CONFIG, ConfigOpt, JsonOpt, StoreOpt

__all__ = ["policy_app"]


policy_app = typer.Typer(cls=FlagGroup, help="Inspect the policy.", no_args_is_help=True)


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
