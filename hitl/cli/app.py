"""The ``hitl`` command (Typer): the app, its panels and the order `hitl --help` lists the commands in (each command
lives in a module of its own). Contract: ../shared/DESIGN.md (exit codes 0/1/2/3/4, --json)."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from hitl.cli.answer import answer
from hitl.cli.approvals import pending, show
from hitl.cli.audit import audit
from hitl.cli.delegate import delegate_app
from hitl.cli.evidence import evidence
from hitl.cli.flags import FlagCommand, FlagGroup
from hitl.cli.keys import keys_app
from hitl.cli.loading import loading
from hitl.cli.migrate import migrate
from hitl.cli.oversight import halt, halts, practice, reviewers, unhalt
from hitl.cli.policy import policy_app
from hitl.cli.purge import purge
from hitl.cli.resume import resume
from hitl.cli.runs import expire, run, validate
from hitl.cli.sessions import sessions_app
from hitl.cli.setup import demo, init, mcp, serve
from hitl.cli.stats import stats
from hitl.cli.tokens import token_app
from hitl.cli.trust import trust_app
from hitl.cli.withdraw import withdraw

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


# Registered in the order `hitl --help` lists them in (each panel's commands in a day's work's order).
app.command(cls=FlagCommand, rich_help_panel=RUNS)(run)
app.command(cls=FlagCommand, rich_help_panel=RUNS)(validate)
app.command(cls=FlagCommand, rich_help_panel=RUNS)(resume)
app.command(cls=FlagCommand, rich_help_panel=REVIEW)(pending)
app.command(cls=FlagCommand, rich_help_panel=REVIEW)(show)
app.command(cls=FlagCommand, rich_help_panel=REVIEW)(audit)
app.command(cls=FlagCommand, rich_help_panel=RUNS)(expire)
# Registered here, so `hitl --help` lists them where a day's work needs them.
for _command in (serve, mcp, init, demo):
    app.command(cls=FlagCommand, rich_help_panel=SETUP)(_command)


_USAGE_ERROR: type[typer.BadParameter] = typer.BadParameter.__mro__[1]
"""Click's ``UsageError`` (as Typer ships it): the base of every usage error, a bad parameter among them."""
assert _USAGE_ERROR.__name__ == "UsageError"


# Registered after the commands above, so `hitl --help` lists its panels in the order of a day's work.
app.add_typer(policy_app, name="policy", rich_help_panel=SETUP)
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
