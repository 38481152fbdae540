"""At ``synchronous = NORMAL`` the SQLite store folds its WAL into the database file on the worker thread, never
inside a commit on the event loop; at ``FULL`` SQLite checkpoints inside commits as it always does.

What is observed is the database file itself: its pages are written there only by a checkpoint (until then they
are in the WAL), so the file grows exactly when a checkpoint ran.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hitl.engine.storage.sqlite.connection import SqliteConnection
from tests.waiting import eventually

ROW = "x" * 16_000
"""Four pages a row: 300 commits write 1,200 pages, past SQLite's automatic checkpoint (1,000 pages)."""


async def _commits(db: SqliteConnection, n: int) -> None:
    await db.run(lambda c: c.execute("CREATE TABLE IF NOT EXISTS filler (k INTEGER PRIMARY KEY, v TEXT)"))
    for _ in range(n):
        await db.run(lambda c: c.execute("INSERT INTO filler (v) VALUES (?)", (ROW,)))


def _size(path: Path) -> int:
    return path.stat().st_size


async def test_the_loops_commits_never_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    db = SqliteConnection(path, checkpoint_every=10**6)
    try:
        await db.run(lambda c: c.execute("SELECT 1"), write=False)  # created, the schema in the file
        created = _size(path)
        await _commits(db, 300)
        assert _size(path) == created  # 1,200 pages committed, none folded into the file on the loop
        assert _size(tmp_path / "h.db-wal") > 300 * len(ROW)
    finally:
        await db.close()
    with sqlite3.connect(path) as check:  # everything committed is there (the last connection folded it in)
        assert check.execute("SELECT COUNT(*) FROM filler").fetchone() == (300,)


async def test_every_so_many_commits_the_worker_thread_folds_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    db = SqliteConnection(path, checkpoint_every=20)
    try:
        await db.run(lambda c: c.execute("SELECT 1"), write=False)
        created = _size(path)
        await _commits(db, 40)

        def folded() -> bool:
            return _size(path) >= created + 20 * len(ROW)

        await eventually(folded, what="a checkpoint on the worker thread to write the commits into the file")
    finally:
        await db.close()


async def test_at_full_sqlite_checkpoints_inside_commits_as_always(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    db = SqliteConnection(path, synchronous="full", checkpoint_every=10**6)
    try:
        await db.run(lambda c: c.execute("SELECT 1"), write=False)
        created = _size(path)
        await _commits(db, 300)
        assert _size(path) > created + 100 * len(ROW)  # the automatic checkpoint ran in a commit (1,000 pages)
    finally:
        await db.close()
