"""SQLite store: the embedded default. One file, WAL, safe across processes.

Every public method runs one transaction on a dedicated worker thread (so the event loop never blocks
on a lock held by another process). Writes use ``BEGIN IMMEDIATE`` so two processes deciding at once
serialise on the database's write lock and the loser reads the winner's state.
"""

from __future__ import annotations

from engine.storage.sqlite_approvals import SqliteApprovals
from engine.storage.sqlite_records import SqliteRecords
from engine.storage.sqlite_runs import SqliteRuns

__all__ = ["SqliteStore"]


class SqliteStore(SqliteApprovals, SqliteRuns, SqliteRecords):
    """SQLite implementation of :class:`engine.ports.Store`.

    Args:
        path: database file (created with its folder when missing).
        synchronous: SQLite's ``synchronous`` setting. ``normal`` (default) with WAL survives process
            crashes; ``full`` also survives power loss at the cost of an fsync per commit.
    """
