"""Row helpers the parts of the PostgreSQL store share inside their transactions (approvals, claims, audit, jobs)."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, Claim
from hitl.engine.errors import NotFound
from hitl.engine.receipts.claims import Issued
from hitl.engine.storage.codec import CLAIM_COLUMNS, claim_of, dumps
from hitl.engine.storage.postgres.connection import Conn
from hitl.engine.storage.postgres.writes import Writes

__all__ = ["insert_audit", "insert_job", "load_approval", "load_claim", "rows_touched", "write_approval", "write_claim"]


async def load_approval(c: Conn, approval_id: str) -> Approval:
    """The approval ``approval_id`` inside a transaction; :class:`NotFound` when there is none."""
    doc = await c.fetchval("SELECT doc FROM approvals WHERE id = $1", approval_id)
    if doc is None:
        raise NotFound.approval(approval_id)
    return Approval.model_validate_json(doc)


async def write_approval(c: Conn, a: Approval, *, insert: bool = False) -> None:
    """Write the approval's row (``insert``: a new one) and announce it on commit, in one statement."""
    w = Writes()
    w.approval(a, insert=insert)
    await w.send(c)


async def insert_audit(c: Conn, e: AuditEntry) -> None:
    """Append ``e`` to its chain (its approval's, or the one for entries that belong to no approval): the chain's
    head is read and moved in the same transaction as the entry is written, so two appends to one chain cannot
    both link to the same predecessor (the second is retried on the first's head)."""
    w = Writes()
    w.audit(e)
    await w.send(c)


async def insert_job(c: Conn, kind: str, payload: dict[str, Any], now: float) -> str:
    """Queue a durable job inside the caller's transaction; returns its id."""
    approval_id = payload.get("approval_id")
    job_id = await c.fetchval(
        "INSERT INTO jobs (kind, payload, approval_id, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        kind,
        dumps(payload),
        str(approval_id) if approval_id is not None else None,
        now,
    )
    return str(job_id)


async def load_claim(c: Conn, key: str) -> Claim | None:
    """The execution claim under ``key`` inside a transaction, or None."""
    row = await c.fetchrow(f"SELECT {CLAIM_COLUMNS} FROM claims WHERE key = $1", key)
    return claim_of(key, tuple(row)) if row is not None else None


async def write_claim(c: Conn, cl: Claim, *, receipt: Issued | None = None) -> None:
    """Write the execution claim's row inside a transaction, with the record of ``receipt`` (issued with a new
    attempt) in the same statement."""
    w = Writes()
    w.claim(cl, receipt=receipt)
    await w.send(c)


def rows_touched(status: str) -> int:
    """The rows a command touched, from the status line PostgreSQL answers it with (``UPDATE 1``, ``DELETE 0``)."""
    return int(status.rsplit(" ", 1)[-1])
