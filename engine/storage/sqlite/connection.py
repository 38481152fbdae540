"""One SQLite database file and one transaction per call, run inline on the event loop when it cannot block.

A short transaction costs tens of microseconds; handing it to a worker thread and back costs about 200. So every
call first runs on the loop's own connection, which never waits for a lock (``busy_timeout = 0``): it either gets
the write lock at once or is told the database is busy. Only then (another process is writing) does the call go
to the worker thread's connection, which waits out ``busy_timeout`` there, off the loop. Calls that scan without a
bound (``blocking=True``: verifying the whole audit trail) always go to the thread.

Every part of the store shares one :class:`SqliteConnection`, and through it the in-process change signals that
wake waiters at once when an approval changes in this process (other processes are noticed by polling).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from hitl.engine.domain.records import chain_link
from hitl.engine.errors import StoreError
from hitl.engine.storage.signals import ChangeSignals
from hitl.engine.storage.sqlite.schema import MIGRATIONS

__all__ = ["CHAIN_LINK_SQL", "SqliteConnection"]

CHAIN_LINK_SQL = "hitl_chain_link"
"""The SQL name of :func:`hitl.engine.domain.records.chain_link` on every connection the store opens."""
T = TypeVar("T")
POLL = 0.005
"""Seconds between looks for changes other processes made, while anyone in this process waits for one."""
_SYNC = {"off": "OFF", "normal": "NORMAL", "full": "FULL", "extra": "EXTRA"}


class _Busy(Exception):
    """The loop's connection could not take the lock at once: run the call on the thread instead."""


class SqliteConnection:
    """The database file, the loop's connection, and the worker thread's connection for calls that may wait.

    Args:
        path: database file (created with its folder when missing).
        synchronous: SQLite's ``synchronous`` setting. ``normal`` (default) with WAL survives process
            crashes; ``full`` also survives power loss at the cost of an fsync per commit.
        busy_timeout: seconds to wait for another process's write lock (on the worker thread).
        inline: run transactions on the event loop when they can take their lock at once (the default). Off, every
            call goes through the worker thread (the behaviour before; kept for measuring both ways).
    """

    def __init__(
        self, path: str | Path, *, synchronous: str = "normal", busy_timeout: float = 30.0, inline: bool = True
    ) -> None:
        if synchronous.lower() not in _SYNC:
            raise StoreError(f"synchronous must be one of {', '.join(_SYNC)}; got {synchronous!r}")
        self.path = Path(path)
        self.synchronous = _SYNC[synchronous.lower()]
        self.inline = inline
        self._busy_ms = int(busy_timeout * 1000)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitl-sqlite")
        self._conn: sqlite3.Connection | None = None
        """The worker thread's connection (waits for locks)."""
        self._loop_conn: sqlite3.Connection | None = None
        """The event loop's connection (never waits)."""
        self._signals = ChangeSignals()
        self._poller: asyncio.Task[None] | None = None
        self.applied: list[int] = []
        """The schema version this process's opening moved the file to (empty: it was up to date)."""

    # -- opening ----------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open_waiting(self._busy_ms)
        return self._conn

    def _open_waiting(self, busy_ms: int) -> sqlite3.Connection:
        # Two connections creating the same new database at once: switching it to WAL takes a lock that SQLite
        # refuses at once instead of waiting out busy_timeout. Wait for it here, as busy_timeout would.
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                return self._open(busy_ms)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)  # on the store's own worker thread, never the event loop

    def _open(self, busy_ms: int) -> sqlite3.Connection:
        """A new connection, with the schema created or migrated."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            # An audit line's link is computed in the statement that inserts it (after reading its chain's last
            # link there): one statement per line instead of two.
            conn.create_function(CHAIN_LINK_SQL, 2, chain_link, deterministic=True)
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = conn.execute("PRAGMA user_version").fetchone()[0]
                for version, step in MIGRATIONS:
                    if current < version:
                        step(conn)
                        conn.execute(f"PRAGMA user_version = {version}")
                        self.applied.append(version)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
        except BaseException:
            conn.close()
            raise
        return conn

    # -- transactions -----------------------------------------------------------------------------------
    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True, blocking: bool = False) -> T:
        """Run ``fn`` in one transaction (``BEGIN IMMEDIATE`` for writes); any database failure is a
        :class:`StoreError` and rolls everything back. ``fn`` must touch nothing but the database: a call the
        loop's connection could not start is run again on the thread."""
        try:
            if self.inline and not blocking:
                if self._loop_conn is None:
                    # Opened (and the schema created) on the thread: opening may wait for another process.
                    self._loop_conn = await self._in_thread(lambda: self._open_waiting(0))
                try:
                    return _transaction(self._loop_conn, fn, write, busy_is_retry=True)
                except _Busy:
                    pass
            return await self._in_thread(lambda: _transaction(self._connect(), fn, write, busy_is_retry=False))
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"SQLite store {self.path} failed: {exc}; nothing was applied. Check that the file is writable "
                "and the disk has room, then retry",
                path=str(self.path),
            ) from exc

    async def _in_thread(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    # -- change signals ---------------------------------------------------------------------------------
    def changed(self, *approval_ids: str) -> None:
        """Approvals changed in this process (their transaction committed): wake their waiters here at once."""
        self._signals.changed(*approval_ids)

    def change_signal(self, approval_id: str) -> asyncio.Event:
        """An event set the next time ``approval_id`` changes: at once when the change is made in this process,
        within one poll (:data:`POLL` seconds) when another process makes it."""
        event = self._signals.signal(approval_id)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll_others())
        return event

    async def _poll_others(self) -> None:
        """While anyone waits: one poll of ``data_version`` for all of them (it moves when another connection
        commits), waking every waiter to look again when it moves. Its cost does not grow with the waiters."""
        # No baseline at first: this task starts after the first waiter read its row, so a commit between that
        # read and our first look would already be in the first value seen. The first look wakes everyone to read
        # again; each later look is compared with one taken before those waiters read.
        seen: int | None = None
        while self._signals.waiting:
            await asyncio.sleep(POLL)
            try:
                version = await self._data_version()
            except StoreError:
                continue  # the waiters' own reads report a broken store; keep polling for the rest
            if version != seen:
                seen = version
                self.changed(*list(self._signals.waiting))

    async def _data_version(self) -> int:
        return int(await self.run(lambda c: c.execute("PRAGMA data_version").fetchone()[0], write=False))

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()

        def shut() -> None:
            for conn in (self._conn, self._loop_conn):
                if conn is not None:
                    conn.close()
            self._conn = self._loop_conn = None

        await self._in_thread(shut)
        self._pool.shutdown(wait=True)


def _transaction(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], write: bool, *, busy_is_retry: bool
) -> T:
    try:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    except sqlite3.OperationalError as exc:
        if busy_is_retry and _is_busy(exc):
            raise _Busy from exc
        raise
    try:
        out = fn(conn)
    except BaseException as exc:
        conn.execute("ROLLBACK")
        if busy_is_retry and isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            raise _Busy from exc  # rolled back: nothing of it happened, the thread runs it whole
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if busy_is_retry and _is_busy(exc):
            raise _Busy from exc
        raise
    return out


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or (
        "locked" in str(exc) or "busy" in str(exc)
    )
