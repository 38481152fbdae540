"""Several connections creating one new SQLite database at the same moment all open it (none sees 'locked')."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl.engine.storage.sqlite import SqliteStore


async def test_concurrent_first_opens_of_a_new_database_all_succeed(tmp_path: Path) -> None:
    for round_ in range(20):  # the race is narrow: try it many times, each on a brand-new file
        stores = [SqliteStore(tmp_path / f"new-{round_}.db") for _ in range(6)]
        try:
            await asyncio.gather(*(s.ping() for s in stores))
        finally:
            for s in stores:
                await s.close()
