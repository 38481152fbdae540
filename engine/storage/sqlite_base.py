"""Shared plumbing of the SQLite store: one connection on one worker thread, one transaction per call,
and the row helpers the parts of the store share."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from engine.domain.models import Approval
from engine.domain.policy import WindowStats
from engine.domain.records import AuditEntry, Claim
from engine.errors import NotFound, StoreError
from engine.storage._codec import dumps, loads
from engine.storage.sqlite_schema import SCHEMA, SCHEMA_VERSION

__all__ = ["SqliteBase"]

T = TypeVar("T")
_SYNC = {"off": "OFF", "normal": "NORMAL", "full": "FULL", "extra": "EXTRA"}


class SqliteBase:
    """The connection, its thread and the transaction runner."""

    def __init__(self, path: str | Path, *, synchronous: str = "normal", busy_timeout: float = 30.0) -> None:
        if synchronous.lower() not in _SYNC:
            raise StoreError(f"synchronous must be one of {', '.join(_SYNC)}; got {synchronous!r}")
        self.path = Path(path)
        self.synchronous = _SYNC[synchronous.lower()]
        self._busy_ms = int(busy_timeout * 1000)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitl-sqlite")
        self._conn: sqlite3.Connection | None = None

    # -- plumbing -------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                    for stmt in _statements(SCHEMA):
                        conn.execute(stmt)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._conn = conn
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        def work() -> T:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                out = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return out

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, work)
        except sqlite3.Error as exc:
            raise StoreError(
                f"SQLite store {self.path} failed: {exc}; nothing was applied", path=str(self.path)
            ) from exc

    async def close(self) -> None:
        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await asyncio.get_running_loop().run_in_executor(self._pool, shut)
        self._pool.shutdown(wait=True)


def _statements(script: str) -> list[str]:
    """Split the schema into statements, keeping trigger bodies whole."""
    out, buf = [], ""
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out


def _load(c: sqlite3.Connection, approval_id: str) -> Approval:
    row = c.execute("SELECT doc FROM approvals WHERE id = ?", (approval_id,)).fetchone()
    if row is None:
        raise NotFound(f"no approval {approval_id!r}; list open ones with `hitl pending`", approval_id=approval_id)
    return Approval.model_validate_json(row[0])


def _write(c: sqlite3.Connection, a: Approval, *, insert: bool = False) -> None:
    doc = a.model_dump_json()
    if insert:
        c.execute(
            "INSERT INTO approvals (id, status, version, created_at, expires_at, required_role, requester, doc)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (a.id, a.status, a.version, a.created_at, a.expires_at, a.required_role, a.requester, doc),
        )
    else:
        c.execute(
            "UPDATE approvals SET status = ?, version = ?, doc = ? WHERE id = ?",
            (a.status, a.version, doc, a.id),
        )


def _audit(c: sqlite3.Connection, e: AuditEntry) -> None:
    c.execute(
        "INSERT INTO audit (at, actor, event, approval_id, version, action_hash, outcome, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (e.at, e.actor, e.event, e.approval_id, e.version, e.action_hash, e.outcome, e.detail),
    )


def _get_claim(c: sqlite3.Connection, key: str) -> Claim | None:
    row = c.execute(
        "SELECT action_hash, holder, attempt, state, lease_until, result FROM claims WHERE key = ?", (key,)
    ).fetchone()
    if row is None:
        return None
    return Claim(
        key=key,
        action_hash=row[0],
        holder=row[1],
        attempt=row[2],
        state=row[3],
        lease_until=row[4],
        result=loads(row[5]) if row[5] else None,
    )


def _put_claim(c: sqlite3.Connection, cl: Claim) -> None:
    c.execute(
        "INSERT OR REPLACE INTO claims (key, action_hash, holder, attempt, state, lease_until, result) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            cl.key,
            cl.action_hash,
            cl.holder,
            cl.attempt,
            cl.state,
            cl.lease_until,
            dumps(cl.result) if cl.result is not None else None,
        ),
    )


def _window(c: sqlite3.Connection, key: str, now: float, window: float, exclude: str = "") -> WindowStats:
    # The event itself never counts toward its own prior stats (re-asking is not double counted).
    row = c.execute(
        "SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM windows WHERE key = ? AND at > ? AND event_id != ?",
        (key, now - window, exclude),
    ).fetchone()
    return WindowStats(count=int(row[0]), total=float(row[1]))
