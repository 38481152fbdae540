"""SQLite store: the embedded default. One file, WAL, safe across processes.

Every public method runs one transaction on a dedicated worker thread (so the event loop never blocks
on a lock held by another process). Writes use ``BEGIN IMMEDIATE`` so two processes deciding at once
serialise on the database's write lock and the loser reads the winner's state.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from engine.domain import execution as claim_rules
from engine.domain.decide import DecideCommand, apply_decision, apply_expiry
from engine.domain.models import Approval, Status
from engine.domain.policy import WindowStats
from engine.domain.records import AuditEntry, Claim, Job, MessageRef, Page, TrustGrant
from engine.errors import DecisionRefused, NotFound, StoreError
from engine.storage._codec import audit_for_decision, decode_cursor, dumps, encode_cursor, loads
from engine.storage.sqlite_schema import SCHEMA, SCHEMA_VERSION

__all__ = ["SqliteStore"]

T = TypeVar("T")
_SYNC = {"off": "OFF", "normal": "NORMAL", "full": "FULL", "extra": "EXTRA"}


class SqliteStore:
    """SQLite implementation of :class:`engine.ports.Store`.

    Args:
        path: database file (created with its folder when missing).
        synchronous: SQLite's ``synchronous`` setting. ``normal`` (default) with WAL survives process
            crashes; ``full`` also survives power loss at the cost of an fsync per commit.
    """

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

    # -- approvals ------------------------------------------------------------------------------------
    async def create_approval(self, approval: Approval) -> tuple[Approval, bool]:
        def tx(c: sqlite3.Connection) -> tuple[Approval, bool]:
            row = c.execute("SELECT doc FROM approvals WHERE id = ?", (approval.id,)).fetchone()
            if row:
                return Approval.model_validate_json(row[0]), False
            _write(c, approval, insert=True)
            _audit(
                c,
                audit_for_decision(
                    approval,
                    actor=approval.requester,
                    event="created",
                    now=approval.created_at,
                    detail=f"{approval.tool} {approval.tier}",
                ),
            )
            return approval, True

        return await self._run(tx)

    async def get_approval(self, approval_id: str) -> Approval:
        return await self._run(lambda c: _load(c, approval_id), write=False)

    async def list_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        after = decode_cursor(cursor)

        def tx(c: sqlite3.Connection) -> Page:
            sql = "SELECT doc, created_at, id FROM approvals WHERE status = 'pending'"
            params: list[Any] = []
            if after:
                sql += " AND (created_at, id) > (?, ?)"
                params += list(after)
            if roles is not None:
                marks = ",".join("?" * len(roles))
                sql += f" AND (required_role IS NULL OR required_role IN ({marks}))"
                params += list(roles)
            if exclude_requester:
                sql += " AND requester != ?"
                params.append(exclude_requester)
            sql += " ORDER BY created_at, id LIMIT ?"
            params.append(limit + 1)
            rows = c.execute(sql, params).fetchall()
            items = [Approval.model_validate_json(r[0]) for r in rows[:limit]]
            nxt = encode_cursor(rows[limit - 1][1], rows[limit - 1][2]) if len(rows) > limit else None
            return Page(items=items, cursor=nxt)

        return await self._run(tx, write=False)

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        def tx(c: sqlite3.Connection) -> Approval | DecisionRefused:
            current = _load(c, cmd.approval_id)
            try:
                updated = apply_decision(current, cmd, now)
            except DecisionRefused as exc:
                _audit(
                    c,
                    audit_for_decision(
                        current,
                        actor=cmd.reviewer.id,
                        event="refused",
                        now=now,
                        outcome=str(exc.code),
                        detail=f"{cmd.kind} via {cmd.via}",
                    ),
                )
                return exc
            _write(c, updated)
            _audit(
                c,
                audit_for_decision(
                    updated,
                    actor=cmd.reviewer.id,
                    event="decided",
                    now=now,
                    detail=f"{cmd.kind} via {cmd.via} -> {updated.status}",
                ),
            )
            return updated

        out = await self._run(tx)
        if isinstance(out, DecisionRefused):
            raise out
        return out

    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        # Several processes share the file and SQLite has no notifications: poll, backing off 5 ms -> 250 ms.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.005
        while True:
            current = await self.get_approval(approval_id)
            left = deadline - loop.time()
            if current.version > after_version or left <= 0:
                return current
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 0.25)

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        def tx(c: sqlite3.Connection) -> list[Approval]:
            rows = c.execute(
                "SELECT doc FROM approvals WHERE status = 'pending' AND expires_at <= ? ORDER BY expires_at LIMIT ?",
                (now, limit),
            ).fetchall()
            out = []
            for (doc,) in rows:
                expired = apply_expiry(Approval.model_validate_json(doc), now)
                if expired is not None:
                    _write(c, expired)
                    _audit(c, audit_for_decision(expired, actor="system", event="expired", now=now))
                    out.append(expired)
            return out

        return await self._run(tx)

    async def transition(
        self,
        approval_id: str,
        *,
        target: Status,
        expected_version: int | None,
        actor: str,
        now: float,
        reason: str | None = None,
    ) -> Approval:
        def tx(c: sqlite3.Connection) -> Approval:
            current = _load(c, approval_id)
            updated = claim_rules.transitioned(
                current, target=target, expected_version=expected_version, now=now, reason=reason
            )
            _write(c, updated)
            _audit(c, audit_for_decision(updated, actor=actor, event=str(target), now=now, detail=reason or ""))
            return updated

        return await self._run(tx)

    # -- execution claims -----------------------------------------------------------------------------
    async def claim(
        self, key: str, *, action_hash: str, holder: str, now: float, lease: float, retry_failed: bool = False
    ) -> Claim:
        def tx(c: sqlite3.Connection) -> Claim:
            existing = _get_claim(c, key)
            out = claim_rules.next_claim(
                existing,
                key=key,
                action_hash=action_hash,
                holder=holder,
                now=now,
                lease=lease,
                retry_failed=retry_failed,
            )
            if out.acquired:
                _put_claim(c, out)
            return out

        return await self._run(tx)

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        def tx(c: sqlite3.Connection) -> Claim:
            out = claim_rules.finished(
                _get_claim(c, key), key=key, holder=holder, attempt=attempt, ok=ok, result=result
            )
            _put_claim(c, out)
            return out

        return await self._run(tx)

    async def get_claim(self, key: str) -> Claim | None:
        return await self._run(lambda c: _get_claim(c, key), write=False)

    # -- checkpoints ----------------------------------------------------------------------------------
    async def save_checkpoint(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        def tx(c: sqlite3.Connection) -> int:
            row = c.execute("SELECT version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            claim_rules.check_checkpoint_version(run_id, row[0] if row else 0, expected_version)
            c.execute(
                "INSERT INTO checkpoints (run_id, version, data, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
                "updated_at = excluded.updated_at",
                (run_id, expected_version + 1, dumps(data), now),
            )
            return expected_version + 1

        return await self._run(tx)

    async def paused_runs(self, *, limit: int = 500) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "SELECT run_id FROM checkpoints WHERE json_extract(data, '$.status') = 'paused' "
                "ORDER BY updated_at LIMIT ?",
                (limit,),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._run(tx, write=False)

    async def load_checkpoint(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        def tx(c: sqlite3.Connection) -> tuple[dict[str, Any], int] | None:
            row = c.execute("SELECT data, version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            return (loads(row[0]), int(row[1])) if row else None

        return await self._run(tx, write=False)

    # -- trust ----------------------------------------------------------------------------------------
    async def grant_trust(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO trust (session_id, tool, granted_by, until) VALUES (?, ?, ?, ?)",
                (session_id, tool, by, until),
            )
            _audit(c, AuditEntry(at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}"))

        await self._run(tx)

    async def list_trust(self, session_id: str, *, now: float) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                "SELECT tool, granted_by, until FROM trust WHERE session_id = ? AND until > ? ORDER BY tool",
                (session_id, now),
            ).fetchall()
            return [TrustGrant(session_id=session_id, tool=t, granted_by=b, until=u) for t, b, u in rows]

        return await self._run(tx, write=False)

    async def list_all_trust(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                "SELECT session_id, tool, granted_by, until FROM trust WHERE until > ? ORDER BY session_id, tool "
                "LIMIT ?",
                (now, limit),
            ).fetchall()
            return [TrustGrant(session_id=s, tool=t, granted_by=b, until=u) for s, t, b, u in rows]

        return await self._run(tx, write=False)

    async def revoke_trust(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        def tx(c: sqlite3.Connection) -> bool:
            n = c.execute(
                "DELETE FROM trust WHERE session_id = ? AND tool = ? AND until > ?", (session_id, tool, now)
            ).rowcount
            if n:
                _audit(c, AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}"))
            return bool(n)

        return await self._run(tx)

    # -- rolling windows ------------------------------------------------------------------------------
    async def window_add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        def tx(c: sqlite3.Connection) -> WindowStats:
            stats = _window(c, key, now, window, exclude=event_id)
            c.execute("DELETE FROM windows WHERE key = ? AND at <= ?", (key, now - window))
            c.execute(
                "INSERT OR IGNORE INTO windows (key, event_id, at, amount) VALUES (?, ?, ?, ?)",
                (key, event_id, now, amount),
            )
            return stats

        return await self._run(tx)

    async def window_stats(self, key: str, *, now: float, window: float) -> WindowStats:
        return await self._run(lambda c: _window(c, key, now, window), write=False)

    # -- audit and messages ---------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        await self._run(lambda c: _audit(c, entry))

    async def audit(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        def tx(c: sqlite3.Connection) -> list[AuditEntry]:
            cols = "seq, at, actor, event, approval_id, version, action_hash, outcome, detail"
            if approval_id:
                rows = c.execute(
                    f"SELECT {cols} FROM audit WHERE approval_id = ? ORDER BY seq LIMIT ?",
                    (approval_id, limit),
                ).fetchall()
            else:
                rows = c.execute(
                    f"SELECT {cols} FROM (SELECT {cols} FROM audit ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                    (limit,),
                ).fetchall()
            keys = cols.split(", ")
            return [AuditEntry.model_validate(dict(zip(keys, r, strict=True))) for r in rows]

        return await self._run(tx, write=False)

    async def enqueue_job(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        def tx(c: sqlite3.Connection) -> str:
            cur = c.execute(
                "INSERT INTO jobs (kind, payload, created_at) VALUES (?, ?, ?)", (kind, dumps(payload), now)
            )
            return str(cur.lastrowid)

        return await self._run(tx)

    async def claim_jobs(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        def tx(c: sqlite3.Connection) -> list[Job]:
            rows = c.execute(
                "SELECT id, kind, payload, attempts FROM jobs WHERE done = 0 AND kind = ? AND (consumer IS NULL OR "
                "claimed_at + ? <= ?) ORDER BY id LIMIT ?",
                (kind, lease, now, limit),
            ).fetchall()
            for row in rows:
                c.execute(
                    "UPDATE jobs SET consumer = ?, claimed_at = ?, attempts = attempts + 1 WHERE id = ?",
                    (consumer, now, row[0]),
                )
            return [Job(id=str(r[0]), kind=r[1], payload=loads(r[2]), attempts=r[3] + 1) for r in rows]

        return await self._run(tx)

    async def ack_job(self, job_id: str) -> None:
        await self._run(lambda c: c.execute("UPDATE jobs SET done = 1 WHERE id = ?", (int(job_id),)) and None)

    async def set_message(self, approval_id: str, ref: MessageRef) -> None:
        await self._run(
            lambda c: (
                c.execute(
                    "INSERT OR REPLACE INTO messages (approval_id, channel, ts) VALUES (?, ?, ?)",
                    (approval_id, ref.channel, ref.ts),
                )
                and None
            )
        )

    async def get_message(self, approval_id: str) -> MessageRef | None:
        def tx(c: sqlite3.Connection) -> MessageRef | None:
            row = c.execute("SELECT channel, ts FROM messages WHERE approval_id = ?", (approval_id,)).fetchone()
            return MessageRef(channel=row[0], ts=row[1]) if row else None

        return await self._run(tx, write=False)

    async def approval_for_message(self, ref: MessageRef) -> str | None:
        def tx(c: sqlite3.Connection) -> str | None:
            row = c.execute(
                "SELECT approval_id FROM messages WHERE channel = ? AND ts = ?", (ref.channel, ref.ts)
            ).fetchone()
            return str(row[0]) if row else None

        return await self._run(tx, write=False)


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
