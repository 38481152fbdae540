"""Row helpers the parts of the PostgreSQL store share inside their transactions (approvals, claims, audit, jobs)."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, Claim, chain_link, entry_body
from hitl.engine.errors import NotFound
from hitl.engine.storage.codec import CLAIM_COLUMNS, audit_values, claim_of, claim_row, dumps
from hitl.engine.storage.postgres.connection import Conn

__all__ = [
    "insert_audit",
    "insert_job",
    "load_approval",
    "rows_touched",
    "load_claim",
    "write_approval",
    "write_claim",
]


async def load_approval(c: Conn, approval_id: str) -> Approval:
    """The approval ``approval_id`` inside a transaction; :class:`NotFound` when there is none."""
    doc = await c.fetchval("SELECT doc FROM approvals WHERE id = $1", approval_id)
    if doc is None:
        raise NotFound(f"no approval {approval_id!r}; list open ones with `hitl pending`", approval_id=approval_id)
    return Approval.model_validate_json(doc)


async def write_approval(c: Conn, a: Approval, *, insert: bool = False) -> None:
    """Write the approval's row (``insert``: a new one) and announce it on commit, in one statement."""
    doc = a.model_dump_json()
    if insert:
        await c.execute(
            "WITH row AS (INSERT INTO approvals (id, status, version, created_at, expires_at, required_role, "
            "requester, doc) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id) "
            "SELECT pg_notify(current_schema() || '_hitl_created', id), "
            "pg_notify(current_schema() || '_hitl_changed', id) FROM row",
            a.id,
            str(a.status),
            a.version,
            a.created_at,
            a.expires_at,
            a.required_role,
            a.requester,
            doc,
        )
    else:
        await c.execute(
            "WITH row AS (UPDATE approvals SET status = $1, version = $2, doc = $3 WHERE id = $4 RETURNING id) "
            "SELECT pg_notify(current_schema() || '_hitl_changed', id) FROM row",
            str(a.status),
            a.version,
            doc,
            a.id,
        )


async def insert_audit(c: Conn, e: AuditEntry) -> None:
    """Append ``e`` to its chain (its approval's, or the one for entries that belong to no approval): the chain's
    head is read and moved in the same transaction as the entry is written, so two appends to one chain cannot
    both link to the same predecessor (the second is retried on the first's head)."""
    chain = e.approval_id or ""
    # The chain's newest link from its head (one row by its key: a serializable read that conflicts only with
    # appends to the same chain, where an index range over the audit table would conflict with its neighbours').
    head = await c.fetchval("SELECT link FROM audit_heads WHERE chain = $1", chain)
    prev = head or ""
    link = chain_link(prev, entry_body(e))
    # The entry and its chain's new head in one statement.
    await c.execute(
        f"WITH entry AS (INSERT INTO audit (at, actor, event, approval_id, version, action_hash, outcome, detail, "
        f"prev, link) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)) {_move_head(head is None)}",
        *audit_values(e),
        prev,
        link,
        chain,
    )


def _move_head(new: bool) -> str:
    """The statement that moves a chain's head to the entry written beside it ($10 its link, $11 the chain)."""
    if new:
        return "INSERT INTO audit_heads (chain, length, link) VALUES ($11, 1, $10)"
    return "UPDATE audit_heads SET length = length + 1, link = $10 WHERE chain = $11"


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


async def write_claim(c: Conn, cl: Claim) -> None:
    """Write the execution claim's row inside a transaction."""
    await c.execute(
        f"INSERT INTO claims (key, {CLAIM_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key) DO UPDATE "
        "SET action_hash = excluded.action_hash, holder = excluded.holder, attempt = excluded.attempt, "
        "state = excluded.state, lease_until = excluded.lease_until, result = excluded.result",
        *claim_row(cl),
    )


def rows_touched(status: str) -> int:
    """The rows a command touched, from the status line PostgreSQL answers it with (``UPDATE 1``, ``DELETE 0``)."""
    return int(status.rsplit(" ", 1)[-1])
