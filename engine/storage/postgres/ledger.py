"""Execution claims in PostgreSQL: one claimant per idempotency key, fenced outcomes."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.records import Claim
from hitl.engine.receipts.claims import Issued, withdrawn_refusal
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import load_claim, rows_touched, write_claim
from hitl.engine.storage.postgres.writes import Writes, read_state

__all__ = ["PgLedger"]


class PgLedger:
    """:class:`hitl.engine.ports.ExecutionLedger` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
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
        approval = receipt.audit.approval_id if receipt is not None and receipt.audit is not None else None
        named = [approval] if approval else []

        async def tx(c: Conn) -> Claim:
            # One read (the claim; with an approved action's receipt, whether its approval was withdrawn and its
            # chain's head), then one write guarded by what it found: no BEGIN or COMMIT.
            found = await read_state(c, claims=[key], chains=named, withdrawals=named)
            if approval and found.withdrawn:
                raise withdrawn_refusal(approval)  # before anything is written
            out = claim_rules.next_claim(
                found.claims.get(key),
                key=key,
                action_hash=action_hash,
                holder=holder,
                now=now,
                lease=lease,
                retry_failed=retry_failed,
            )
            if out.acquired:  # one statement: the receipt, and its audit entry, only for a new attempt
                w = Writes(found, guarded=True)
                w.claim(out, receipt=receipt)
                await w.send(c)
            return out

        return await self.db.run(tx, guarded=True)

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        async def tx(c: Conn) -> Claim:
            out = claim_rules.finished(
                await load_claim(c, key), key=key, holder=holder, attempt=attempt, ok=ok, result=result
            )
            await write_claim(c, out)
            return out

        return await self.db.run(tx)

    async def renew(self, key: str, *, holder: str, attempt: int, now: float, lease: float) -> bool:
        async def tx(c: Conn) -> bool:
            done = await c.execute(
                "UPDATE claims SET lease_until = $1 WHERE key = $2 AND holder = $3 AND attempt = $4 "
                "AND state = 'running'",
                now + lease,
                key,
                holder,
                attempt,
            )
            return rows_touched(done) > 0

        return await self.db.run(tx)

    async def get(self, key: str) -> Claim | None:
        return await self.db.run(lambda c: load_claim(c, key), write=False)
