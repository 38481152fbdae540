"""``hitl purge``: remove what the retention no longer keeps, once (``hitl serve`` does it every hour)."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer

from hitl.cli.options import JsonOpt, StoreOpt

__all__ = ["AuditRetentionOpt", "RetentionOpt", "purge"]

RetentionOpt = Annotated[
    str | None,
    typer.Option(
        "--retention",
        envvar="HITL_RETENTION",
        help="Keep ended runs, final approvals, claims, done jobs and lapsed trust this long: 30d, 12h, never. "
        "[default: 30d]",
    ),
]
AuditRetentionOpt = Annotated[
    str | None,
    typer.Option(
        "--audit-retention",
        envvar="HITL_AUDIT_RETENTION",
        help="Keep the audit trail this long, at least --retention (default 400d): 2y as 730d, never.",
    ),
]


def purge(
    retention: RetentionOpt = None,
    audit_retention: AuditRetentionOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be removed, and remove nothing.")
    ] = False,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Remove what ended longer ago than the retention, and audit chains older than the audit retention.

    Use --dry-run to count it first. The removal is audited (a `purged` entry naming the counts) and `hitl audit verify`
    still passes after it. `hitl serve` purges every hour with the same settings; run this for a store no server
    runs against."""
    from rich.table import Table

    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.domain.retention import Retention
    from hitl.engine.errors import InvalidInput
    from hitl.engine.runtime.process import open_runtime
    from hitl.engine.runtime.retention import purge_all

    out = Out(as_json=as_json)
    try:
        horizons = Retention.parse(retention, audit_retention)
    except InvalidInput as exc:
        raise typer.BadParameter(exc.message, param_hint="--retention/--audit-retention") from None
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime) as rt:
            now = rt.clock.now()
            if dry_run:
                done = await rt.store.purger.due(horizons, now=now)
            else:
                done = await purge_all(rt.store, horizons, now=now, actor=f"cli:{_user()}")
        counts = done.model_dump()
        heading = "would remove" if dry_run else "removed"
        if out.json:
            out.emit({"retention": horizons.describe(), "dry_run": dry_run, heading.replace(" ", "_"): counts})
            return 0
        out.text(("retention: ", "dim"), horizons.describe())
        if done.total == 0:
            out.text("nothing to remove")
            return 0
        table = Table(box=None, pad_edge=False)
        table.add_column(heading)
        table.add_column("count", justify="right")
        for name, n in counts.items():
            if n:
                table.add_row(name.replace("_", " "), str(n))
        out.console.print(table)
        return 0

    run_command(out, work)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container with an unnamed uid)
        return "unknown"
