"""``hitl pending`` (the approvals waiting, the most important first) and ``hitl show`` (one approval or several in
full): through ``hitl serve``'s API with a token (``HITL_API_URL`` and ``HITL_TOKEN``), or read from the store."""

from __future__ import annotations

from typing import Annotated

import typer

from hitl.cli.options import NO_CONFIG, AsOpt, ConfigOpt, JsonOpt, Order, StoreOpt

__all__ = ["pending", "show"]


def pending(
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
    reviewer: AsOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many.")] = 50,
    order: Annotated[
        Order,
        typer.Option(
            help="rank: the most important first (tier, how far over its threshold, time left); age: oldest first."
        ),
    ] = Order.RANK,
) -> None:
    """List pending approvals, the most important first (only those the reviewer may decide, with --as)."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import approval_view
    from hitl.cli.output import Out
    from hitl.cli.remote import connect
    from hitl.engine.domain.ranking import PendingOrder, why_ranked
    from hitl.engine.errors import InvalidInput

    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=reviewer)
    sort: PendingOrder = "age" if order is Order.AGE else "rank"

    async def work() -> int:
        client = await connect(settings.reviewer)
        if client is not None:  # the token says who is asking: the approvals it may decide
            listed = await client.pending(limit=limit, order=sort)
            out.pending(listed.items, waiting=listed.waiting)
            return 0
        from hitl.engine.runtime.process import open_runtime
        from hitl.engine.storage.queue import queue_page

        async with open_runtime(settings.runtime, read_only=True) as rt:
            context = rt.contexts.default
            roles = None
            if context.config_path is None:
                out.warn(NO_CONFIG)
            if settings.reviewer:
                roles = sorted((await context.service.reviewers.reviewer(settings.reviewer)).roles)
                if not roles and settings.reviewer != context.service.requester:  # a typo is not "nothing for you"
                    known = ", ".join(sorted(context.config.roles)) or "none"
                    raise InvalidInput(
                        f"{settings.reviewer!r} is in no role of {context.config_path or 'the default config'} "
                        f"(roles: {known}); check --as / HITL_REVIEWER",
                        reviewer=settings.reviewer,
                    )
            approvals = rt.store.approvals
            mine = settings.reviewer
            now = rt.contexts.clock.now()
            if sort == "rank":  # as a person meets it now: every one due soon first, wherever the rank puts it
                page = await queue_page(approvals, now=now, roles=roles, exclude_requester=mine, limit=limit)
            else:
                page = await approvals.list_pending(
                    roles=roles, exclude_requester=mine, limit=limit, order=sort, now=now
                )
            views = []
            for a in page.items:
                view = await approval_view(rt, a)
                views.append(view.model_copy(update={"ranked": why_ranked(a, now=now)}) if sort == "rank" else view)
            waiting = await approvals.count_pending(roles=roles, exclude_requester=mine, now=now) if roles else None
            out.pending(views, waiting=waiting)
        return 0

    run_command(out, work)


def show(
    targets: Annotated[
        list[str],
        typer.Argument(metavar="ID...", help="One approval or more (each an id, a unique prefix or a session)."),
    ],
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Show one approval or several, one after another (or the approval a session is waiting on), in the words of
    `--config`'s hitl.yaml."""
    from hitl.api.models import AuditView
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.flows import approval_view, resolve_target
    from hitl.cli.output import Out, approval_json
    from hitl.cli.remote import connect
    from hitl.mail.states import DELIVERY_EVENTS

    if as_json and len(targets) > 1:
        raise typer.BadParameter("--json shows one approval: run `hitl show ID --json` for each", param_hint="ID")
    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=config, reviewer=None)

    async def work() -> int:
        client = await connect(None)
        if client is not None:
            views = [await client.approval(target) for target in targets]  # all found before any is printed
            for view in views:
                out.emit(approval_json(view.model_copy(update={"audit": None}))) if out.json else out.approval(view)
            return 0
        from hitl.engine.runtime.process import open_runtime

        async with open_runtime(settings.runtime, read_only=True) as rt:
            views = [await approval_view(rt, (await resolve_target(rt, target))[0]) for target in targets]
            for view in views:
                if out.json:
                    out.emit(approval_json(view))
                else:  # with how it reached people (e-mail, the page opened) and its withdrawal, from its trail
                    trail = [AuditView.of(e) for e in await rt.store.audit.entries(approval_id=view.id)]
                    told = [e for e in trail if e.event in DELIVERY_EVENTS or e.event == "withdrawn"]
                    out.approval(view.model_copy(update={"audit": told}))
        return 0

    run_command(out, work)
