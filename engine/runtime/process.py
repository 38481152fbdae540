"""The runtime: one store, one clock, the contexts composed on it and the run lifecycle, built once per process.

``hitl`` commands open one with :func:`open_runtime`; ``hitl serve`` builds one with the Slack notifier and
reporter; the Python API can do either. ``HITL_NOW`` freezes the clock (tests and rehearsals of expiry).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from hitl.engine.consequences.running import ConsequenceRunner
from hitl.engine.errors import NotFound
from hitl.engine.policy_engines import OpaClient
from hitl.engine.ports import Clock, Notifier, RunReporter, Store, Workspace
from hitl.engine.process.workers import worker_name
from hitl.engine.receipts.ports import ReceiptSigner, ReceiptsRemote
from hitl.engine.runtime.compose import RunContexts
from hitl.engine.runtime.lifecycle import RunLifecycle
from hitl.engine.runtime.settings import RuntimeSettings
from hitl.engine.storage.factory import open_store, sqlite_path

__all__ = ["Runtime", "RuntimeSettings", "open_runtime"]


@dataclass
class Runtime:
    """A process's store, clock, contexts and run lifecycle."""

    store: Store
    clock: Clock
    contexts: RunContexts
    lifecycle: RunLifecycle

    @classmethod
    def build(
        cls,
        *,
        store: Store,
        clock: Clock,
        config_path: str | None,
        notifier: Notifier | None = None,
        reporter: RunReporter | None = None,
        worker_id: str | None = None,
        signer: ReceiptSigner | None = None,
        workspace: Workspace | None = None,
        remote: ReceiptsRemote | None = None,
        consequences: ConsequenceRunner | None = None,
        opa: OpaClient | None = None,
    ) -> Runtime:
        """``worker_id``: this process's name as run owner, claim holder and job consumer (default: a unique
        ``hitl:host:pid:id``; a name shared by two processes would let each take the other's runs for its own).
        ``workspace``: who is a person of the Slack workspace (``hitl serve``'s), for the delegates it may name.
        ``remote``: how a process without the signing key reaches ``hitl serve`` for receipts. ``consequences``:
        what runs tools' consequences (``hitl serve``'s worker processes; default: threads of this process).
        ``opa``: what asks OPA for ``opa:`` source rules (none: they ask a person)."""
        name = worker_id or worker_name("hitl")
        contexts = RunContexts(
            store=store,
            clock=clock,
            config_path=config_path,
            notifier=notifier,
            worker_id=name,
            signer=signer,
            workspace=workspace,
            remote=remote,
            consequences=consequences,
            opa=opa,
        )
        return cls(store, clock, contexts, RunLifecycle(contexts, reporter=reporter, worker_id=name))

    async def close(self) -> None:
        await self.contexts.consequences.aclose()
        await self.store.close()


@asynccontextmanager
async def open_runtime(
    settings: RuntimeSettings, *, kind: str = "hitl", read_only: bool = False
) -> AsyncIterator[Runtime]:
    """A runtime on the store ``settings`` names, closed on exit (reviewers hear through ``hitl serve`` on the same
    store: the settings' notifier, if any, queues for it what this process changes). ``kind`` begins the process's
    unique worker name (``cli``, ``mcp``). ``read_only``: a command that only reads never creates a store (and tells
    nobody: it changes nothing); a SQLite file that is not there is an error (a mistyped HITL_STORE must not read as
    "nothing pending")."""
    path = sqlite_path(settings.store_url) if read_only else None
    if path is not None and not path.exists():
        raise NotFound(
            f"no store at {path}: nothing was ever recorded there. Check HITL_STORE (or --store); `hitl run` and "
            "`hitl serve` create the store",
            path=str(path),
        )
    store, clock = open_store(settings.store_url), settings.clock()
    rt = Runtime.build(
        store=store,
        clock=clock,
        config_path=settings.config_path,
        notifier=settings.notifier(store, clock) if settings.notifier is not None and not read_only else None,
        worker_id=worker_name(kind),
        remote=settings.remote,
        opa=settings.opa,
    )
    try:
        yield rt
    finally:
        await rt.close()
