"""Execution claims in PostgreSQL: one claimant per idempotency key, fenced outcomes."""

from __future__ import annotations

import json
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.records import Claim
from hitl.engine.receipts.claims import Issued, withdrawn_refusal
from hitl.engine.storage.codec import claim_of
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import load_claim, rows_touched, write_claim
from hitl.engine.storage.postgres.writes import State, Writes

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

        async def tx(c: Conn) -> Claim:
            found, read = (await load_claim(c, key), None) if not approval else await _claim_issuing(c, key, approval)
            out = claim_rules.next_claim(
                found,
                key=key,
                action_hash=action_hash,
                holder=holder,
                now=now,
                lease=lease,
                retry_failed=retry_failed,
            )
            if out.acquired:  # one statement: the receipt, and its audit entry, only for a new attempt
                w = Writes(read)
                w.claim(out, receipt=receipt)
                await w.send(c)
            return out

        return await self.db.run(tx)

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


_CLAIM_ISSUING = (
    "SELECT (SELECT json_build_array(action_hash, holder, attempt, state, lease_until, result) FROM claims "
    "WHERE key = $1), (SELECT state FROM receipt_approvals WHERE approval_id = $2), "
    "(SELECT json_build_array(length, link) FROM audit_heads WHERE chain = $2)"
)
"""A claim's read when it issues an approved action's receipt, in one statement: the claim, whether the approval
was withdrawn, and the head of its audit chain (its issue's entry links to it)."""


async def _claim_issuing(c: Conn, key: str, approval: str) -> tuple[Claim | None, State]:
    """The claim under ``key`` and the head of ``approval``'s audit chain (for :class:`Writes`); raises
    ``action_rejected`` when ``approval`` was withdrawn, before anything is written."""
    row = await c.fetchrow(_CLAIM_ISSUING, key, approval)
    assert row is not None  # scalar subqueries: always one row
    if row[1] == "withdrawn":
        raise withdrawn_refusal(approval)
    head = json.loads(row[2]) if row[2] else None
    found = claim_of(key, json.loads(row[0])) if row[0] else None
    return found, State(heads={approval: (int(head[0]), str(head[1])) if head else None})
