"""The SQLite store: every port on one shared connection."""

from __future__ import annotations

import logging
from pathlib import Path

from hitl.engine.storage.sqlite.alerts import SqliteAlerts
from hitl.engine.storage.sqlite.approvals import SqliteApprovals
from hitl.engine.storage.sqlite.audit import SqliteAudit
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.delegations import SqliteDelegations
from hitl.engine.storage.sqlite.halts import SqliteHalts
from hitl.engine.storage.sqlite.holds import SqliteHolds
from hitl.engine.storage.sqlite.jobs import SqliteJobs
from hitl.engine.storage.sqlite.journal import SqliteJournal
from hitl.engine.storage.sqlite.ledger import SqliteLedger
from hitl.engine.storage.sqlite.messages import SqliteMessages
from hitl.engine.storage.sqlite.purge import SqlitePurger
from hitl.engine.storage.sqlite.receipts import SqliteReceipts
from hitl.engine.storage.sqlite.runs import SqliteRuns
from hitl.engine.storage.sqlite.tallies import SqliteTallies
from hitl.engine.storage.sqlite.trust import SqliteTrust
from hitl.engine.storage.sqlite.upgrade import end_dropped_grants
from hitl.engine.storage.sqlite.windows import SqliteWindows
from hitl.engine.storage.tally_buffer import flush_at_close

log = logging.getLogger(__name__)

__all__ = ["SqliteStore"]


class SqliteStore:
    """SQLite implementation of :class:`hitl.engine.ports.Store`.

    Args:
        path: database file (created with its folder when missing).
        synchronous: ``normal`` (default; with WAL it survives process crashes) or ``full`` (also power loss).
        inline: run short transactions on the event loop when they can take their lock at once (default), else
            every call through the store's worker thread (see :class:`SqliteConnection`).
    """

    def __init__(self, path: str | Path, *, synchronous: str = "normal", inline: bool = True) -> None:
        self.db = SqliteConnection(path, synchronous=synchronous, inline=inline, after_migrations=end_dropped_grants)
        self.path = self.db.path
        self.approvals = SqliteApprovals(self.db)
        self.ledger = SqliteLedger(self.db)
        self.runs = SqliteRuns(self.db)
        self.journal = SqliteJournal(self.db)
        self.jobs = SqliteJobs(self.db)
        self.trust = SqliteTrust(self.db)
        self.halts = SqliteHalts(self.db)
        self.delegations = SqliteDelegations(self.db)
        self.receipts = SqliteReceipts(self.db)
        self.holds = SqliteHolds(self.db)
        self.alerts = SqliteAlerts(self.db)
        self.windows = SqliteWindows(self.db)
        self.audit = SqliteAudit(self.db)
        self.messages = SqliteMessages(self.db)
        self.tallies = SqliteTallies(self.db)
        self.purger = SqlitePurger(self.db)

    async def migrate(self) -> list[int]:
        """The schema versions opening the file applied (``PRAGMA user_version`` moved to :data:`SCHEMA_VERSION`)."""
        await self.ping()
        return list(self.db.applied)

    async def ping(self) -> None:
        await self.db.run(lambda c: c.execute("SELECT 1").fetchone(), write=False)

    async def close(self) -> None:
        await flush_at_close(self.tallies.flush, log)
        await self.db.close()
