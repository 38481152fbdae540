"""The embedded store stays small: after a 2,000-approval burst, with another process's readers open throughout
(as the bot's are), the SQLite WAL is emptied once writers are quiet, and never kept past its size limit; a
checkpoint a reader held off is tried again with no write to start it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.runtime.compose import compose
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.storage.sqlite.connection import WAL_LIMIT, SqliteConnection
from hitl.testing import FakeClock
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def test_the_wal_is_emptied_after_a_burst_while_readers_stay_open(tmp_path: Path) -> None:
    db = tmp_path / "hitl.db"
    wal = Path(f"{db}-wal")
    store = SqliteStore(db)
    service = compose(store=store, clock=FakeClock(), config_path=str(CONFIG)).service
    await store.ping()
    reader = sqlite3.connect(db, check_same_thread=False)  # another process's reader (the bot's), never closed
    reading = True
    biggest = 0

    async def read_all_along() -> int:
        nonlocal biggest
        reads = 0
        while reading:
            reader.execute("SELECT COUNT(*) FROM approvals WHERE status = 'pending'").fetchone()
            biggest = max(biggest, wal.stat().st_size if wal.exists() else 0)
            reads += 1
            await asyncio.sleep(0.002)
        return reads

    readers = asyncio.create_task(read_all_along())
    try:
        for start in range(0, 2000, 100):  # a burst: a hundred proposals at a time
            await asyncio.gather(
                *(
                    service.propose(
                        ProposeRequest(
                            "refund",
                            {"order_id": str(i), "customer_id": f"C{i}", "amount": 5, "reason": "damaged in transit"},
                            session_id=f"s{i}",
                        )
                    )
                    for i in range(start, start + 100)
                )
            )
        assert (await store.approvals.list_pending(limit=1)).items
        await eventually(lambda: store.db.truncations >= 1, what="a truncating checkpoint once writers are quiet")
        assert wal.stat().st_size <= WAL_LIMIT
        assert wal.stat().st_size == 0  # emptied, with the reader still open and reading
    finally:
        reading = False
        assert await readers > 0
        reader.close()
        await store.close()
    assert biggest > 0


async def test_a_checkpoint_a_reader_held_off_is_tried_again_without_another_write(tmp_path: Path) -> None:
    db = tmp_path / "quiet.db"
    conn = SqliteConnection(db, idle_checkpoint=0.05)
    try:
        await conn.run(lambda c: c.execute("CREATE TABLE IF NOT EXISTS t (x)"))
        await conn.run(lambda c: c.execute("INSERT INTO t VALUES (1)"))  # the last write: nothing follows it
        reader = sqlite3.connect(db)
        reader.execute("BEGIN")
        reader.execute("SELECT * FROM t").fetchall()  # holds a snapshot: the WAL cannot be emptied meanwhile
        await eventually(lambda: conn.held_off >= 1, what="a truncating checkpoint the reader held off")
        assert conn.truncations == 0
        reader.rollback()
        reader.close()
        await eventually(lambda: conn.truncations >= 1, what="the checkpoint tried again, with no write since")
        assert Path(f"{db}-wal").stat().st_size == 0
    finally:
        await conn.close()
