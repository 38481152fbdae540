"""One SQLite connection on one worker thread, and one transaction per call. Every part of the store shares it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from engine.errors import StoreError
from engine.storage.sqlite.schema import SCHEMA, SCHEMA_VERSION, add_missing_columns

__all__ = ["SqliteConnection"]

T = TypeVar("T")
_SYNC = {"off": "OFF", "normal": "NORMAL", "full": "FULL", "extra": "EXTRA"}


class SqliteConnection:
    """The database file, its connection and the thread that owns it.

    Args:
        path: database file (created with its folder when missing).
        synchronous: SQLite's ``synchronous`` setting. ``normal`` (default) with WAL survives process
            crashes; ``full`` also survives power loss at the cost of an fsync per commit.
        busy_timeout: seconds to wait for another process's write lock.
    """

    def __init__(self, path: str | Path, *, synchronous: str = "normal", busy_timeout: float = 30.0) -> None:
        if synchronous.lower() not in _SYNC:
            raise StoreError(f"synchronous must be one of {', '.join(_SYNC)}; got {synchronous!r}")
        self.path = Path(path)
        self.synchronous = _SYNC[synchronous.lower()]
        self._busy_ms = int(busy_timeout * 1000)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitl-sqlite")
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            # Two connections creating the same new database at once: switching it to WAL takes a lock that SQLite
            # refuses at once instead of waiting out busy_timeout. Wait for it here, as busy_timeout would.
            deadline = time.monotonic() + self._busy_ms / 1000
            while True:
                try:
                    self._conn = self._open()
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.01)  # on the store's own worker thread, never the event loop
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """A new connection, with the schema created or migrated."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                    add_missing_columns(conn)
                    for stmt in _statements(SCHEMA):
                        conn.execute(stmt)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        """Run ``fn`` in one transaction (``BEGIN IMMEDIATE`` for writes); any database failure is a
        :class:`StoreError` and rolls everything back."""

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
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(
                f"SQLite store {self.path} failed: {exc}; nothing was applied. Check that the file is writable "
                "and the disk has room, then retry",
                path=str(self.path),
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
