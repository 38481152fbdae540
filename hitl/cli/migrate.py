"""``hitl migrate``: bring the store's schema up to this version of hitl, ahead of a deploy.

Every store also migrates as it opens (PostgreSQL under an advisory lock, so replicas starting at once apply each
migration once); this command does it on purpose, from a deploy pipeline or by hand, and says what it applied (on
Redis, the key layout it moved the store to), and that the schema is up to date only when it changed nothing.
"""

from __future__ import annotations

from hitl.cli.options import JsonOpt, StoreOpt

__all__ = ["migrate"]


def migrate(as_json: JsonOpt = False, store: StoreOpt = None) -> None:
    """Apply the store's schema migrations not applied yet (creating the store when there is none)."""
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.storage import open_store

    out = Out(as_json=as_json)
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        opened = open_store(settings.runtime.store_url)
        try:
            applied = await opened.migrate()
        finally:
            await opened.close()
        if out.json:
            out.emit({"applied": applied})
        elif applied:
            out.text(("applied ", "bold green"), "schema version " + ", ".join(map(str, applied)))
        else:
            out.text("the schema is up to date")
        return 0

    run_command(out, work)
