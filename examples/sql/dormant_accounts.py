"""A SQL tool and its consequence: close accounts nobody has signed in to since a date, in a local SQLite database
(``ACCOUNTS_DB``, default ``.hitl/accounts.db``; created with sample accounts on first use).

The tool runs one ``UPDATE``. Its consequence runs *the same statement* inside a transaction that is always rolled
back, on a connection that refuses to commit anything: SQLite's authorizer lets it read, run that one ``UPDATE``
on ``accounts`` and roll back, and denies every other write, ``COMMIT`` among them. So it counts exactly the rows
the ``UPDATE`` would touch (no second copy of its ``WHERE`` to drift apart from it), and nothing it does can stay.
Its cost: while it runs (bounded by the tool's consequence timeout) it holds SQLite's write lock, as the ``UPDATE``
itself would; readers are not blocked (WAL). Where even that is too much, count with ``SELECT count(*)`` and the
same ``WHERE`` on a ``mode=ro`` connection instead (:func:`count_read_only`).
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

CLOSE = "UPDATE accounts SET status = 'closed', closed_by = ? WHERE status = 'active' AND last_login < ?"
"""The tool's one statement, shared word for word with its consequence."""
WHERE = "status = 'active' AND last_login < ?"
SEED = [
    ("A-1", "ana@example.com", "2025-01-10"),
    ("A-2", "ben@example.com", "2026-10-02"),
    ("A-3", "cho@example.com", "2024-06-30"),
    ("A-4", "dev@example.com", "2026-11-20"),
]


def db_path() -> Path:
    """Where the accounts are (``ACCOUNTS_DB``)."""
    return Path(os.environ.get("ACCOUNTS_DB", ".hitl/accounts.db"))


def connect() -> sqlite3.Connection:
    """A writable connection to the accounts, made with the sample accounts if new (the tool's)."""
    path = db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, email TEXT, last_login TEXT, "
        "status TEXT NOT NULL DEFAULT 'active', closed_by TEXT)"
    )
    conn.executemany("INSERT OR IGNORE INTO accounts (id, email, last_login) VALUES (?, ?, ?)", SEED)
    conn.commit()
    return conn


def close_dormant(before: str, *, idempotency_key: str) -> dict[str, Any]:
    """Close every active account whose last sign-in is before ``before`` (``YYYY-MM-DD``); the effect."""
    with closing(connect()) as db, db:
        done = db.execute("SELECT count(*) FROM accounts WHERE closed_by = ?", (idempotency_key,)).fetchone()[0]
        if done:  # the same approved call again: nothing more
            return {"closed": done, "replayed": True}
        n = db.execute(CLOSE, (idempotency_key, before)).rowcount
        return {"closed": n, "replayed": False}


_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_SAVEPOINT}


def _only_this_update(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
    """SQLite's authorizer for the consequence's connection: reads, the ``UPDATE`` of ``accounts``, savepoints
    and rolling back; everything else (``COMMIT``, any other write, ``ATTACH``, ``PRAGMA``) is denied."""
    if action in _ALLOWED or (action == sqlite3.SQLITE_UPDATE and arg1 == "accounts"):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_TRANSACTION and arg1 in ("BEGIN", "ROLLBACK"):
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def cannot_commit() -> sqlite3.Connection:
    """A connection to the accounts (never creating them) on which only reading, the ``UPDATE`` of ``accounts``,
    ``BEGIN`` and ``ROLLBACK`` are allowed: ``COMMIT`` and every other write fail (the consequence's)."""
    path = db_path().resolve()
    db = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, timeout=1, isolation_level=None)
    db.set_authorizer(_only_this_update)
    return db


def close_dormant_consequence(args: dict[str, Any]) -> object:
    """What closing the dormant accounts will do: the rows the very ``UPDATE`` touches, counted inside a
    transaction that is rolled back on a connection that cannot commit."""
    if not db_path().is_file():
        return "There is no accounts database yet: nothing would be closed"
    with closing(cannot_commit()) as db:
        db.execute("BEGIN")
        try:
            rows = db.execute(CLOSE + " RETURNING id", ("(a consequence: rolled back)", args["before"]))
            closed = [row[0] for row in rows.fetchall()]
        finally:
            db.execute("ROLLBACK")  # always: a consequence changes nothing
    return {
        "summary": f"Closes {len(closed)} active account{'s' if len(closed) != 1 else ''} last seen before "
        f"{args['before']}",
        "table": [{"account": account} for account in sorted(closed)],
    }


def count_read_only(before: str) -> int:
    """The other way to count, with no write lock at all: ``SELECT count(*)`` with the ``UPDATE``'s ``WHERE`` on a
    connection SQLite opens read-only (``mode=ro``); the price is a second copy of the predicate."""
    with closing(sqlite3.connect(f"{db_path().resolve().as_uri()}?mode=ro", uri=True)) as db:
        return int(db.execute(f"SELECT count(*) FROM accounts WHERE {WHERE}", (before,)).fetchone()[0])
