"""The Redis store: every port on one shared client."""

from __future__ import annotations

import functools
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from hitl.engine.errors import StoreError
from hitl.engine.storage.redis.alerts import RedisAlerts
from hitl.engine.storage.redis.approvals import RedisApprovals
from hitl.engine.storage.redis.audit import RedisAudit
from hitl.engine.storage.redis.connection import LAYOUT, RedisConnection
from hitl.engine.storage.redis.delegations import RedisDelegations
from hitl.engine.storage.redis.halts import RedisHalts
from hitl.engine.storage.redis.holds import RedisHolds
from hitl.engine.storage.redis.jobs import RedisJobs
from hitl.engine.storage.redis.journal import RedisJournal
from hitl.engine.storage.redis.ledger import RedisLedger
from hitl.engine.storage.redis.messages import RedisMessages
from hitl.engine.storage.redis.purge import RedisPurger
from hitl.engine.storage.redis.receipts import RedisReceipts
from hitl.engine.storage.redis.runs import RedisRuns
from hitl.engine.storage.redis.tallies import RedisTallies
from hitl.engine.storage.redis.trust import RedisTrust
from hitl.engine.storage.redis.upgrade import upgrade
from hitl.engine.storage.redis.windows import RedisWindows
from hitl.engine.storage.tally_buffer import flush_at_close

log = logging.getLogger(__name__)

__all__ = ["RedisStore"]


class RedisStore:
    """Redis implementation of :class:`hitl.engine.ports.Store`.

    Args:
        client: an injected ``redis.asyncio.Redis`` (the caller owns pooling and TLS settings).
        prefix: key prefix, so several deployments or tests share one server.
        deadline: seconds any one store operation may take before it fails as a retryable StoreError.
    """

    def __init__(self, client: Redis, *, prefix: str = "hitl", deadline: float = 5.0) -> None:
        self.conn = RedisConnection(client, prefix=prefix, deadline=deadline)
        self.conn.upgrade = functools.partial(upgrade, self.conn)
        self.prefix = prefix
        self.approvals = RedisApprovals(self.conn)
        self.ledger = RedisLedger(self.conn)
        self.runs = RedisRuns(self.conn)
        self.journal = RedisJournal(self.conn)
        self.jobs = RedisJobs(self.conn)
        self.trust = RedisTrust(self.conn)
        self.halts = RedisHalts(self.conn)
        self.delegations = RedisDelegations(self.conn)
        self.receipts = RedisReceipts(self.conn)
        self.holds = RedisHolds(self.conn)
        self.alerts = RedisAlerts(self.conn)
        self.windows = RedisWindows(self.conn)
        self.audit = RedisAudit(self.conn)
        self.messages = RedisMessages(self.conn)
        self.tallies = RedisTallies(self.conn)
        self.purger = RedisPurger(self.conn)

    async def migrate(self) -> list[int]:
        """Redis keys carry no schema version: the store marks its key layout, and the first operation of a
        process upgrades a store an older hitl wrote (:mod:`.upgrade`); this runs every step of that on purpose
        (each is idempotent). The layout this call moved the store to (``[3]``), as the other stores name the
        migrations they applied; empty when it was in this layout already."""
        await self.ping()
        return [int(LAYOUT)] if await self.conn.ready(upgrade=True) else []

    async def ping(self) -> None:
        try:
            await self.conn.r.ping()
        except (RedisError, OSError) as exc:
            raise StoreError(f"Redis store failed: {exc}; check that Redis is up") from exc

    async def close(self) -> None:
        await flush_at_close(self.tallies.flush, log)
        await self.approvals.close()
        await self.conn.close()
