"""What opening a SQLite file an older hitl wrote does after its numbered migrations, in their transaction: each
trust grant schema 8 dropped is audited as ended (:mod:`hitl.engine.domain.upgrade_grants`), on the audit table as
this release writes it, so the trail no longer reads as if the grant were in force and still verifies."""

from __future__ import annotations

import sqlite3
import time

from hitl.engine.domain.upgrade_grants import grant_ended_at_upgrade
from hitl.engine.storage.sqlite.rows import insert_audit
from hitl.engine.storage.sqlite.schema import GRANTS_DROPPED

__all__ = ["end_dropped_grants"]


def end_dropped_grants(c: sqlite3.Connection) -> int:
    """Audit each grant kept aside in :data:`~.schema.GRANTS_DROPPED` as ended by the upgrade, then remove them;
    how many (none on a file that had none: one lookup)."""
    found = c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (GRANTS_DROPPED,)).fetchone()
    if found is None:
        return 0
    rows = c.execute(
        f"SELECT session_id, tool, granted_by, until FROM {GRANTS_DROPPED} ORDER BY session_id, tool"
    ).fetchall()
    now = time.time()  # the file keeps no clock: the upgrade happens now, as the opening's own writes do
    for session_id, tool, granted_by, until in rows:
        entry = grant_ended_at_upgrade(
            session_id=str(session_id), tool=str(tool), granted_by=str(granted_by), until=float(until), now=now
        )
        insert_audit(c, entry)
    c.execute(f"DROP TABLE {GRANTS_DROPPED}")
    return len(rows)
