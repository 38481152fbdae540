"""The Redis store: every port on one shared client."""

from __future__ import annotations

import json
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from hitl.engine.domain.models import kind_of_older
from hitl.engine.errors import StoreError
from hitl.engine.storage.redis.alerts import RedisAlerts
from hitl.engine.storage.redis.approvals import RedisApprovals
from hitl.engine.storage.redis.audit import RedisAudit
from hitl.engine.storage.redis.codec import KIND_FIRST, text, with_kind_first
from hitl.engine.storage.redis.connection import RedisConnection
from hitl.engine.storage.redis.halts import RedisHalts
from hitl.engine.storage.redis.jobs import RedisJobs
from hitl.engine.storage.redis.journal import RedisJournal
from hitl.engine.storage.redis.ledger import RedisLedger
from hitl.engine.storage.redis.messages import RedisMessages
from hitl.engine.storage.redis.purge import RedisPurger
from hitl.engine.storage.redis.runs import RedisRuns
from hitl.engine.storage.redis.tallies import RedisTallies
from hitl.engine.storage.redis.trust import RedisTrust
from hitl.engine.storage.redis.windows import RedisWindows

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
        self.prefix = prefix
        self.approvals = RedisApprovals(self.conn)
        self.ledger = RedisLedger(self.conn)
        self.runs = RedisRuns(self.conn)
        self.journal = RedisJournal(self.conn)
        self.jobs = RedisJobs(self.conn)
        self.trust = RedisTrust(self.conn)
        self.halts = RedisHalts(self.conn)
        self.alerts = RedisAlerts(self.conn)
        self.windows = RedisWindows(self.conn)
        self.audit = RedisAudit(self.conn)
        self.messages = RedisMessages(self.conn)
        self.tallies = RedisTallies(self.conn)
        self.purger = RedisPurger(self.conn)

    async def migrate(self) -> list[int]:
        """Redis keys carry no schema version: a layout change reads both forms (see the purger) or, where the old
        form must not be read, removes it here. Trust grants an older hitl wrote named no requester, so they
        are removed rather than guessed (each would have lapsed within ``trust_ttl``); nothing reads them. Approval
        documents get their kind as a field."""
        await self.ping()
        c = self.conn
        try:
            sessions = [text(s) for s in await c.r.smembers(c.legacy_trust_sessions_key)]
            if sessions:
                await c.r.delete(c.legacy_trust_sessions_key, *(c.legacy_trust_key(s) for s in sessions))
            await self._write_kinds()
            await self._move_alert_states()
        except (RedisError, OSError) as exc:
            raise StoreError(f"Redis store failed: {exc}; check that Redis is up") from exc
        return []

    async def _move_alert_states(self) -> None:
        """Alert state an older hitl kept as a run record (``run:{alert:<name>}``) moved to its own hash, where no
        run a caller names can overwrite it. A caller's own run under such a name stays where it is."""
        c = self.conn
        async for key in c.r.scan_iter(match=f"{c.p}:run:{{alert:*}}", count=500):
            found = await c.r.hmget(key, ["data", "version"])
            if found[0] is None:
                continue
            data = json.loads(found[0])
            if not isinstance(data, dict) or data.get("kind") != "alert":
                continue
            run_id = text(key)[len(f"{c.p}:run:{{") : -1]
            record = json.dumps({"version": int(found[1] or 1), "data": data}, separators=(",", ":"))
            await c.r.hsetnx(c.alerts_key, run_id.removeprefix("alert:"), record)
            await c.r.delete(key)
            for index in (c.running_key, c.paused_key, c.ended_key):
                await c.r.zrem(index, run_id)

    async def _write_kinds(self) -> None:
        """Give every approval document an older hitl wrote the kind its old markers meant (reading one without it
        works too: :func:`~hitl.engine.domain.models.kind_of_older`; this makes it a field). Documents never change
        after creation, so each is rewritten on its own; Python's JSON keeps every number as it was."""
        c = self.conn
        cursor = 0
        while True:
            cursor, found = await c.r.zscan(c.all_key, cursor, count=500)
            ids = [text(m) for m, _ in found]
            docs = await c.r.mget([c.doc_key(i) for i in ids]) if ids else []
            for approval_id, doc in zip(ids, docs, strict=True):
                if doc is None:
                    continue
                if not text(doc).startswith(KIND_FIRST):
                    data = json.loads(doc)
                    await c.r.set(c.doc_key(approval_id), with_kind_first(data, str(kind_of_older(data))))
            if cursor == 0:
                return

    async def ping(self) -> None:
        try:
            await self.conn.r.ping()
        except (RedisError, OSError) as exc:
            raise StoreError(f"Redis store failed: {exc}; check that Redis is up") from exc

    async def close(self) -> None:
        try:
            await self.tallies.flush()  # the metric counts still held
        except Exception:  # closing anyway: a metric is not worth failing a shutdown over
            log.warning("could not write the last metric counts; they are lost")
        await self.approvals.close()
        await self.conn.close()
