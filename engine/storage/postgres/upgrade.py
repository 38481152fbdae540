"""What opening a PostgreSQL schema an older hitl wrote does after its numbered migrations, under their advisory
lock: each trust grant migration 4 dropped is audited as ended (:mod:`hitl.engine.domain.upgrade_grants`), on the
audit tables as this release writes them, so the trail no longer reads as if the grant were in force and still
verifies. The grants wait aside in their own table until then: a process that stopped between the two finds them
at its next opening."""

from __future__ import annotations

import time

from hitl.engine.domain.upgrade_grants import grant_ended_at_upgrade
from hitl.engine.storage.postgres.connection import Conn
from hitl.engine.storage.postgres.rows import insert_audit
from hitl.engine.storage.postgres.schema import GRANTS_DROPPED

__all__ = ["end_dropped_grants"]


async def end_dropped_grants(c: Conn) -> int:
    """Audit each grant kept aside in :data:`~.schema.GRANTS_DROPPED` as ended by the upgrade and remove them, in
    one transaction; how many (none on a schema that had none: one lookup)."""
    if await c.fetchval("SELECT to_regclass($1)", GRANTS_DROPPED) is None:
        return 0
    async with c.transaction():
        rows = await c.fetch(f"SELECT session_id, tool, granted_by, until FROM {GRANTS_DROPPED} ORDER BY 1, 2")
        now = time.time()  # the upgrade happens now, as the opening's own writes do
        for r in rows:
            entry = grant_ended_at_upgrade(
                session_id=str(r[0]), tool=str(r[1]), granted_by=str(r[2]), until=float(r[3]), now=now
            )
            await insert_audit(c, entry)
        await c.execute(f"DROP TABLE {GRANTS_DROPPED}")
    return len(rows)
