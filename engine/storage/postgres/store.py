"""The PostgreSQL store: every port on one shared pool."""

from __future__ import annotations

import logging

from hitl.engine.storage.postgres.alerts import PgAlerts
from hitl.engine.storage.postgres.approvals import PgApprovals
from hitl.engine.storage.postgres.audit import PgAudit
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.delegations import PgDelegations
from hitl.engine.storage.postgres.halts import PgHalts
from hitl.engine.storage.postgres.holds import PgHolds
from hitl.engine.storage.postgres.jobs import PgJobs
from hitl.engine.storage.postgres.journal import PgJournal
from hitl.engine.storage.postgres.ledger import PgLedger
from hitl.engine.storage.postgres.messages import PgMessages
from hitl.engine.storage.postgres.purge import PgPurger
from hitl.engine.storage.postgres.receipts import PgReceipts
from hitl.engine.storage.postgres.runs import PgRuns
from hitl.engine.storage.postgres.tallies import PgTallies
from hitl.engine.storage.postgres.trust import PgTrust
from hitl.engine.storage.postgres.upgrade import end_dropped_grants
from hitl.engine.storage.postgres.windows import PgWindows
from hitl.engine.storage.tally_buffer import flush_at_close

log = logging.getLogger(__name__)

__all__ = ["PostgresStore"]


class PostgresStore:
    """PostgreSQL implementation of :class:`hitl.engine.ports.Store`.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: the schema hitl's tables live in (created when missing; ``public`` by default), so one database
            can hold several deployments, or hitl beside an application's own tables.
        min_size, max_size: the connection pool's bounds.
    """

    def __init__(self, dsn: str, *, schema: str = "public", min_size: int = 1, max_size: int = 10) -> None:
        self.db = PgConnection(
            dsn, schema=schema, min_size=min_size, max_size=max_size, after_migrations=end_dropped_grants
        )
        self.approvals = PgApprovals(self.db)
        self.ledger = PgLedger(self.db)
        self.runs = PgRuns(self.db)
        self.journal = PgJournal(self.db)
        self.jobs = PgJobs(self.db)
        self.trust = PgTrust(self.db)
        self.halts = PgHalts(self.db)
        self.delegations = PgDelegations(self.db)
        self.receipts = PgReceipts(self.db)
        self.holds = PgHolds(self.db)
        self.alerts = PgAlerts(self.db)
        self.windows = PgWindows(self.db)
        self.audit = PgAudit(self.db)
        self.messages = PgMessages(self.db)
        self.tallies = PgTallies(self.db)
        self.purger = PgPurger(self.db)

    async def migrate(self) -> list[int]:
        """The migrations opening the pool applied (under the advisory lock; none when another process had)."""
        await self.ping()
        return list(self.db.applied)

    async def ping(self) -> None:
        async def q(c: Conn) -> None:
            await c.fetchval("SELECT 1")

        await self.db.run(q, write=False)

    async def close(self) -> None:
        await flush_at_close(self.tallies.flush, log)
        await self.db.close()
