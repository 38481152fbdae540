"""Execution claims in SQLite: one claimant per idempotency key, fenced outcomes."""

from __future__ import annotations

import sqlite3
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.records import Claim
from hitl.engine.receipts.claims import Issued
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.receipts import refuse_withdrawn
from hitl.engine.storage.sqlite.rows import load_claim, write_claim

__all__ = ["SqliteLedger"]


class SqliteLedger:
    """:class:`hitl.engine.ports.ExecutionLedger` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def claim(
        self,
        key: str,
        *,
        action_hash: str,
        holder: str,
        now: float,
        lease: float,
        retry_failed: bool = False,
        receipt: Issued | None = None,
    ) -> Claim:
        def tx(c: sqlite3.Connection) -> Claim:
            refuse_withdrawn(c, receipt)
            out = claim_rules.next_claim(
                load_claim(c, key),
                key=key,
                action_hash=action_hash,
                holder=holder,
                now=now,
                lease=lease,
                retry_failed=retry_failed,
            )
            if out.acquired:
                write_claim(c, out, receipt=receipt)  # the receipt only for a new attempt
            return out

        return await self.db.run(tx)

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        def tx(c: sqlite3.Connection) -> Claim:
            out = claim_rules.finished(
                load_claim(c, key), key=key, holder=holder, attempt=attempt, ok=ok, result=result
            )
            write_claim(c, out)
            return out

        return await self.db.run(tx)

    async def renew(self, key: str, *, holder: str, attempt: int, now: float, lease: float) -> bool:
        def tx(c: sqlite3.Connection) -> bool:
            n = c.execute(
                "UPDATE claims SET lease_until = ? WHERE key = ? AND holder = ? AND attempt = ? AND state = 'running'",
                (now + lease, key, holder, attempt),
            ).rowcount
            return bool(n)

        return await self.db.run(tx)

    async def get(self, key: str) -> Claim | None:
        return await self.db.run(lambda c: load_claim(c, key), write=False)
