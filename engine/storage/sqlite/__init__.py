"""SQLite store: the embedded default. One file, WAL, safe across processes.

Every call runs one transaction on the connection's worker thread (so the event loop never blocks on a lock
held by another process). Writes use ``BEGIN IMMEDIATE`` so two processes deciding at once serialise on the
database's write lock and the loser reads the winner's state.
"""

from __future__ import annotations

from hitl.engine.storage.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
