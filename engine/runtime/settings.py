"""Where a process's runtime is: its store, hitl.yaml and clock, from flags, environment variables and defaults.

Apart from :mod:`hitl.engine.runtime.process` so that a command reads its settings without importing the runtime it
may never open: a CLI command through ``hitl serve``'s API (``HITL_API_URL``) opens no store, composes no context
and runs nothing (``tests/cli/test_startup.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hitl.engine.clocks import FakeClock, SystemClock
from hitl.engine.errors import InvalidInput
from hitl.engine.storage.factory import DEFAULT_STORE_URL

if TYPE_CHECKING:  # the runtime's parts, named for the type checker only (what imports them is the runtime's)
    from collections.abc import Callable

    from hitl.engine.policy_engines import OpaClient
    from hitl.engine.ports import Clock, Notifier, Store
    from hitl.engine.receipts.ports import ReceiptsRemote

__all__ = ["RuntimeSettings"]


@dataclass(frozen=True)
class RuntimeSettings:
    """Where things are: explicit values win over environment variables, which win over defaults."""

    store_url: str = DEFAULT_STORE_URL
    config_path: str | None = None
    now: float | None = None
    """``HITL_NOW`` (epoch seconds): a frozen clock."""
    remote: ReceiptsRemote | None = None
    """How this process reaches ``hitl serve`` for receipts (``HITL_API_URL``, ``HITL_TOKEN``): the composition
    root's client; None: it cannot, and claims nothing a receipt would cover."""
    opa: OpaClient | None = None
    """What asks OPA for ``opa:`` source rules (the composition root's HTTP client); None: they ask a person."""
    notifier: Callable[[Store, Clock], Notifier] | None = None
    """Builds, on the runtime's store and clock, what tells reviewers of the changes this process makes (the CLI's
    queues card updates for ``hitl serve``: the composition root's); None: nothing is told from here."""

    @classmethod
    def from_env(
        cls,
        *,
        store: str | None = None,
        config: str | None = None,
        remote: ReceiptsRemote | None = None,
        opa: OpaClient | None = None,
        notifier: Callable[[Store, Clock], Notifier] | None = None,
    ) -> RuntimeSettings:
        """``store`` / ``config`` from flags, else ``HITL_STORE`` / ``HITL_CONFIG`` / ``HITL_NOW``, else defaults;
        ``remote``: how this process reaches ``hitl serve`` for receipts; ``opa``: how it asks OPA; ``notifier``:
        what tells reviewers of its changes."""
        raw_now = os.environ.get("HITL_NOW") or None
        try:
            now = float(raw_now) if raw_now else None
        except ValueError:
            raise InvalidInput(f"HITL_NOW={raw_now!r} is not a number of epoch seconds") from None
        return cls(
            store_url=store or os.environ.get("HITL_STORE") or DEFAULT_STORE_URL,
            config_path=config or os.environ.get("HITL_CONFIG") or None,
            now=now,
            remote=remote,
            opa=opa,
            notifier=notifier,
        )

    def clock(self) -> Clock:
        return FakeClock(self.now) if self.now is not None else SystemClock()
