"""One SQLite database file and one transaction per call, run inline on the event loop when it cannot block.

A short transaction costs tens of microseconds; handing it to a worker thread and back costs about 200. So every
call first runs on the loop's own connection, which never waits for a lock (``busy_timeout = 0``): it either gets
the write lock at once or is told the database is busy. Only then (another process is writing) does the call go
to the worker thread's connection, which waits out ``busy_timeout`` there, off the loop. Calls that scan without a
bound (``blocking=True``: verifying the whole audit trail) always go to the thread.

Every part of the store shares one :class:`SqliteConnection`, and through it the in-process change signals that
wake waiters at once when an approval changes in this process (other processes are noticed by polling).

At ``synchronous = NORMAL`` the loop's connection does not checkpoint the WAL itself. SQLite's automatic
checkpoint runs inside the commit that pushes the WAL past its limit: it copies the WAL into the database file and
fsyncs it, which stalled the event loop for milliseconds every hundred commits or so. Instead, every
:data:`CHECKPOINT_EVERY` commits of the loop's connection start a passive checkpoint on the worker thread (SQLite lets
writers go on while it runs). A commit is as durable either way: the WAL is the record, the checkpoint only folds it
into the file. At ``FULL`` every commit fsyncs the WAL, and a checkpoint's fsync beside them slowed them more than
the stall it saved (measured: the cycle's median 5.3 -> 6.7 ms), so there SQLite checkpoints as it always does.

The WAL stays small. A passive checkpoint cannot restart the WAL while another connection (the bot's readers, another
process) still reads it, so under a burst it only grows (2,000 approvals left 190 MB). Two things bound it: SQLite's
``journal_size_limit`` (:data:`WAL_LIMIT`) truncates the file whenever the WAL restarts, and once this process has
written nothing for :data:`IDLE_CHECKPOINT` seconds, one truncating checkpoint on the worker thread folds the WAL
in and empties it (it gives up at once, to try after the next quiet spell, if a reader is in the middle of a read).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from hitl.engine.domain.records import chain_link
from hitl.engine.errors import StoreError
from hitl.engine.storage.signals import ChangeSignals
from hitl.engine.storage.sqlite.schema import MIGRATIONS

__all__ = ["CHAIN_LINK_SQL", "SqliteConnection"]

CHAIN_LINK_SQL = "hitl_chain_link"
"""The SQL name of :func:`hitl.engine.domain.records.chain_link` on every connection the store opens."""
T = TypeVar("T")
log = logging.getLogger(__name__)
POLL = 0.005
"""Seconds between looks for changes other processes made, while anyone in this process waits for one."""
CHECKPOINT_EVERY = 256
"""Write transactions of the loop's connection between two checkpoints on the worker thread (at the few pages a
transaction writes, about the WAL size at which SQLite's own automatic checkpoint would run: 1,000 pages)."""
WAL_LIMIT = 64 * 1024 * 1024
"""Bytes the WAL file is cut back to whenever it restarts (SQLite's ``journal_size_limit``)."""
IDLE_CHECKPOINT = 2.0
"""Seconds without a write in this process before the WAL is folded in and emptied (a truncating checkpoint)."""
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
        checkpoint_every: write transactions on the loop between two checkpoints on the worker thread, at
            ``synchronous`` ``normal`` or ``off`` (see the module docstring).
        idle_checkpoint: seconds without a write before the WAL is emptied (see the module docstring).
        after_migrations: run in the opening's transaction after the numbered migrations, on every opening (the
            store's: :func:`~.upgrade.end_dropped_grants`, which needs this release's tables and this module's
            chain function, so it cannot be a migration step).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "normal",
        busy_timeout: float = 30.0,
        inline: bool = True,
        checkpoint_every: int = CHECKPOINT_EVERY,
        idle_checkpoint: float = IDLE_CHECKPOINT,
        after_migrations: Callable[[sqlite3.Connection], object] | None = None,
    ) -> None:
        if synchronous.lower() not in _SYNC:
            raise StoreError(f"synchronous must be one of {', '.join(_SYNC)}; got {synchronous!r}")
        self.path = Path(path)
        self.synchronous = _SYNC[synchronous.lower()]
        self.inline = inline
        self._busy_ms = int(busy_timeout * 1000)
        self._after_migrations = after_migrations
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitl-sqlite")
        self._conn: sqlite3.Connection | None = None
        """The worker thread's connection (waits for locks)."""
        self._loop_conn: sqlite3.Connection | None = None
        """The event loop's connection (never waits)."""
        self._signals = ChangeSignals()
        self._poller: asyncio.Task[None] | None = None
        self._checkpoints_aside = self.synchronous in ("OFF", "NORMAL")
        """The loop's connection leaves checkpoints to the worker thread (see the module docstring)."""
        self._checkpoint_every = checkpoint_every
        self._commits = 0
        """Write transactions of the loop's connection since the last checkpoint was started."""
        self._checkpoint: asyncio.Future[None] | None = None
        self._idle_checkpoint = idle_checkpoint
        self._last_write = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._truncation: asyncio.Future[bool] | None = None
        self.truncations = 0
        """Truncating checkpoints that emptied the WAL (for tests and measuring)."""
        self.held_off = 0
        """Truncating checkpoints a reader held off (each is tried again after another quiet spell)."""
        self._closing = False
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
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = conn.execute("PRAGMA user_version").fetchone()[0]
                for version, step in MIGRATIONS:
                    if current < version:
                        step(conn)
                        conn.execute(f"PRAGMA user_version = {version}")
                        self.applied.append(version)
                if self._after_migrations is not None:
                    self._after_migrations(conn)
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
                    self._loop_conn = await self._in_thread(self._open_loop)
                try:
                    out = _transaction(self._loop_conn, fn, write, busy_is_retry=True)
                except _Busy:
                    pass
                else:
                    if write:
                        self._committed()
                        self._wrote()
                    return out
            out = await self._in_thread(lambda: _transaction(self._connect(), fn, write, busy_is_retry=False))
            if write:
                self._wrote()
            return out
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"SQLite store {self.path} failed: {exc}; nothing was applied. Check that the file is writable "
                "and the disk has room, then retry",
                path=str(self.path),
            ) from exc

    async def _in_thread(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    # -- checkpoints ------------------------------------------------------------------------------------
    def _open_loop(self) -> sqlite3.Connection:
        """The loop's connection: it never waits for a lock, and never checkpoints inside its own commits."""
        conn = self._open_waiting(0)
        if self._checkpoints_aside:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        return conn

    def _committed(self) -> None:
        """One more write transaction on the loop: every ``checkpoint_every``, fold the WAL into the file on the
        worker thread (unless the last checkpoint is still running)."""
        if not self._checkpoints_aside:
            return
        self._commits += 1
        if self._commits < self._checkpoint_every or (self._checkpoint is not None and not self._checkpoint.done()):
            return
        self._commits = 0
        self._checkpoint = asyncio.get_running_loop().run_in_executor(self._pool, self._fold_wal)
        self._checkpoint.add_done_callback(_checkpointed)

    def _fold_wal(self) -> None:
        """A passive checkpoint on the worker thread's connection: it copies what no reader still needs, never waits
        for a lock, and lets writers go on meanwhile."""
        self._connect().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _wrote(self) -> None:
        """A write committed: once none follows for ``idle_checkpoint`` seconds, empty the WAL."""
        loop = asyncio.get_running_loop()
        self._last_write = loop.time()
        if self._idle_timer is None:
            self._idle_timer = loop.call_later(self._idle_checkpoint, self._quiet)

    def _quiet(self) -> None:
        loop = asyncio.get_running_loop()
        left = self._last_write + self._idle_checkpoint - loop.time()
        if left > 0:  # written since: wait for the rest of the quiet spell
            self._idle_timer = loop.call_later(left, self._quiet)
            return
        self._idle_timer = None
        if self._truncation is not None and not self._truncation.done():
            return
        self._truncation = loop.run_in_executor(self._pool, self._truncate_wal)
        self._truncation.add_done_callback(self._truncated)

    def _truncate_wal(self) -> bool:
        """A truncating checkpoint on the worker thread, giving up at once if a reader holds the WAL; True when
        the WAL was emptied."""
        conn = self._connect()
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        if busy:
            self.held_off += 1
        else:
            self.truncations += 1
        return not busy

    def _truncated(self, done: asyncio.Future[bool]) -> None:
        """After a truncating checkpoint: one a reader held off is tried again after another quiet spell, writes or
        none (after the last write of a burst there is no next write to start one, and the WAL would stay full)."""
        _checkpointed(done)
        if done.cancelled() or done.exception() is not None or done.result() or self._closing:
            return
        if self._idle_timer is None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_checkpoint, self._quiet)

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
        self._closing = True  # no checkpoint is tried again from here on
        if self._poller is not None:
            self._poller.cancel()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

        def shut() -> None:  # on the one worker thread, after a checkpoint it may still be running
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


def _checkpointed(done: asyncio.Future[Any]) -> None:
    """A checkpoint that failed is only logged: the WAL keeps every commit, and the next checkpoint folds it."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("SQLite checkpoint failed; the next one will fold the WAL in", exc_info=done.exception())


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or (
        "locked" in str(exc) or "busy" in str(exc)
    )
