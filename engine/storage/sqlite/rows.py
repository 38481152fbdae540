"""Row helpers several parts of the SQLite store share inside their transactions (approvals, claims, audit lines)."""

from __future__ import annotations

import sqlite3
from typing import Any

from hitl.engine.domain.journal import held_by_another
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, Claim, entry_body
from hitl.engine.errors import NotFound
from hitl.engine.receipts.claims import Issued
from hitl.engine.storage.codec import (
    APPROVAL_COLUMNS,
    AUDIT_COLUMNS,
    CLAIM_COLUMNS,
    approval_doc,
    approval_row,
    audit_values,
    claim_of,
    claim_row,
    dumps,
    reviewer_rows,
)
from hitl.engine.storage.sqlite.connection import CHAIN_LINK_SQL
from hitl.engine.storage.sqlite.receipts import insert_receipt

__all__ = [
    "insert_audit",
    "insert_job",
    "insert_reviewers",
    "load_approval",
    "load_claim",
    "own_run",
    "write_approval",
    "write_claim",
]

_INSERT_APPROVAL = (
    f"INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES ({', '.join('?' * len(APPROVAL_COLUMNS.split(',')))})"
)


def load_approval(c: sqlite3.Connection, approval_id: str) -> Approval:
    """The approval ``approval_id`` inside a transaction; :class:`NotFound` when there is none."""
    row = c.execute("SELECT doc FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    if row is None:
        raise NotFound.approval(approval_id)
    return Approval.model_validate_json(row[0])


def write_approval(c: sqlite3.Connection, a: Approval, *, insert: bool = False) -> None:
    """Write the approval's row (``insert``: a new one, with the rows of who decided what for any decisions it
    already holds) inside a transaction. An update writes status, version and document only: a decide writes its
    decision's reviewer itself (:func:`insert_reviewers`)."""
    doc = approval_doc(a)
    if insert:
        c.execute(_INSERT_APPROVAL, approval_row(a, doc))
        insert_reviewers(c, reviewer_rows(a))
    else:
        c.execute(
            "UPDATE approvals SET status = ?, version = ?, doc = ? WHERE id = ?", (a.status, a.version, doc, a.id)
        )


def insert_reviewers(c: sqlite3.Connection, rows: list[tuple[str, float, str]]) -> None:
    """Add rows to the index of who decided what (``approval_reviewers``; one already there is kept)."""
    if rows:
        c.executemany(
            "INSERT OR IGNORE INTO approval_reviewers (reviewer, created_at, approval_id) VALUES (?, ?, ?)", rows
        )


# The chain's last link is read from its head (a primary-key lookup in ``audit_heads``, which the insert trigger
# keeps at the chain's last entry) rather than from the chain's newest entry through the by-approval index: the same
# link, found for a third less of the statement's time. Were a chain's tail cut off behind the triggers' back, the
# next entry would link onto the head's link, and `hitl audit verify` reports the break there.
_INSERT_AUDIT = (
    f"INSERT INTO audit ({AUDIT_COLUMNS}, prev, link) "
    f"SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, last.link, {CHAIN_LINK_SQL}(last.link, ?) FROM "
    "(SELECT coalesce((SELECT link FROM audit_heads WHERE chain = ?), '') AS link) AS last"
)


def insert_audit(c: sqlite3.Connection, e: AuditEntry) -> None:
    """Append ``e`` to its chain (its approval's, or the one for entries that belong to no approval), reading the
    chain's last link from its head and writing the new one in one statement."""
    c.execute(_INSERT_AUDIT, (*audit_values(e), entry_body(e), e.approval_id or ""))


def insert_job(c: sqlite3.Connection, kind: str, payload: dict[str, Any], now: float) -> str:
    """Queue a durable job inside the caller's transaction; returns its id."""
    cur = c.execute("INSERT INTO jobs (kind, payload, created_at) VALUES (?, ?, ?)", (kind, dumps(payload), now))
    return str(cur.lastrowid)


def load_claim(c: sqlite3.Connection, key: str) -> Claim | None:
    """The execution claim under ``key`` inside a transaction, or None."""
    row = c.execute(f"SELECT {CLAIM_COLUMNS} FROM claims WHERE key = ?", (key,)).fetchone()
    return claim_of(key, row) if row is not None else None


def write_claim(c: sqlite3.Connection, cl: Claim, *, receipt: Issued | None = None) -> None:
    """Write the execution claim's row inside a transaction, and the record of ``receipt``, issued with it, when
    the claim is a new attempt (not one recovered from a holder that stopped), with its audit entry."""
    c.execute(f"INSERT OR REPLACE INTO claims (key, {CLAIM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", claim_row(cl))
    if receipt is not None and not cl.recovered:
        insert_receipt(c, receipt)
        if receipt.audit is not None:
            insert_audit(c, receipt.audit)


def own_run(c: sqlite3.Connection, run_id: str, holder: str, now: float, lease: float) -> str | None:
    """Take or renew the lease on ``run_id`` for ``holder`` inside a transaction: None when taken, else the other
    holder whose lease still runs (nothing is written then)."""
    row = c.execute("SELECT holder, lease_until FROM run_owners WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None and held_by_another(row[0], row[1], holder=holder, now=now):
        return str(row[0])
    c.execute(
        "INSERT OR REPLACE INTO run_owners (run_id, holder, lease_until) VALUES (?, ?, ?)",
        (run_id, holder, now + lease),
    )
    return None
