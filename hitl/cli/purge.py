"""``hitl purge``: remove what the retention no longer keeps, once (``hitl serve`` does it every hour)."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer
from rich.table import Table

from engine.domain.retention import Retention
from engine.errors import InvalidInput
from engine.retention_sweep import purge_all
from engine.runtime import open_runtime
from hitl.cli.command import run_command
from hitl.cli.context import CliSettings
from hitl.cli.options import JsonOpt, StoreOpt
from hitl.cli.output import Out

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
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Remove what ended longer ago than the retention, and audit chains older than the audit retention.

    The removal is audited (a `purged` entry naming the counts) and `hitl audit verify` still passes after it.
    `hitl serve` purges every hour with the same settings; run this for a store no server runs against."""
    out = Out(as_json=as_json)
    try:
        horizons = Retention.parse(retention, audit_retention)
    except InvalidInput as exc:
        raise typer.BadParameter(exc.message, param_hint="--retention/--audit-retention") from None
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime) as rt:
            done = await purge_all(rt.store, horizons, now=rt.clock.now(), actor=f"cli:{_user()}")
        counts = done.model_dump()
        if out.json:
            out.emit({"retention": horizons.describe(), "removed": counts})
            return 0
        out.text(("retention: ", "dim"), horizons.describe())
        if done.total == 0:
            out.text("nothing to remove")
            return 0
        table = Table(box=None, pad_edge=False)
        table.add_column("removed")
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
