"""``hitl audit``: print the audit trail, check it (``verify``), anchor it (``head``) or show what each decider saw
(``show ID``)."""

from __future__ import annotations

from typing import Annotated

import typer

from hitl.cli.options import JsonOpt, StoreOpt

__all__ = ["audit"]


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
