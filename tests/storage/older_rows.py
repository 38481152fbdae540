"""Rows as an earlier release of hitl wrote them, for the upgrade tests: an audit entry with the columns the audit
table had before it kept the view a decider saw (PostgreSQL, SQLite), an approval before it kept its rank."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, chain_link, entry_body
from hitl.engine.storage.codec import audit_values
from hitl.engine.storage.postgres.connection import Conn

__all__ = ["insert_older_approval", "insert_older_audit", "insert_older_audit_sqlite"]


async def insert_older_approval(conn: Conn, a: Approval, doc: str | None = None) -> None:
    """Insert ``a`` (or ``doc`` for it) as a PostgreSQL schema before the queue's rank held it."""
    await conn.execute(
        "INSERT INTO approvals (id, status, version, created_at, expires_at, required_role, requester, doc) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        a.id,
        str(a.status),
        a.version,
        a.created_at,
        a.expires_at,
        a.required_role,
        a.requester,
        doc if doc is not None else a.model_dump_json(),
    )


async def insert_older_audit(conn: Conn, entry: AuditEntry) -> None:
    """Append ``entry`` (it keeps no view) to its chain on a PostgreSQL schema of an earlier release, and move the
    chain's head where that schema has heads."""
    assert entry.view is None and entry.view_digest is None
    chain = entry.approval_id or ""
    heads = await conn.fetchval("SELECT to_regclass('audit_heads') IS NOT NULL")
    found = await conn.fetchrow("SELECT length, link FROM audit_heads WHERE chain = $1", chain) if heads else None
    length, prev = (int(found[0]), str(found[1])) if found else (0, "")
    link = chain_link(prev, entry_body(entry))
    await conn.execute(
        "INSERT INTO audit (at, actor, event, approval_id, version, action_hash, outcome, detail, prev, link) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        *audit_values(entry)[:8],
        prev,
        link,
    )
    if heads:
        await conn.execute(
            "INSERT INTO audit_heads (chain, length, link) VALUES ($1, $2, $3) "
            "ON CONFLICT (chain) DO UPDATE SET length = excluded.length, link = excluded.link",
            chain,
            length + 1,
            link,
        )


def insert_older_audit_sqlite(db: sqlite3.Connection, entry: AuditEntry) -> None:
    """Append ``entry`` (it keeps no view) to its chain in a SQLite file of an earlier release (schema 7: its
    trigger moves the chain's head)."""
    assert entry.view is None and entry.view_digest is None
    found = db.execute("SELECT link FROM audit_heads WHERE chain = ?", (entry.approval_id or "",)).fetchone()
    prev = str(found[0]) if found else ""
    db.execute(
        "INSERT INTO audit (at, actor, event, approval_id, version, action_hash, outcome, detail, prev, link) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*audit_values(entry)[:8], prev, chain_link(prev, entry_body(entry))),
    )
