"""Trust grants an upgrade ends: the audit entry each one leaves, the same on every store.

A grant an older hitl wrote named no requester (it covered anyone in its session), so the upgrade that binds grants
to their requester drops it rather than guess (SQLite schema 8, PostgreSQL 4, the Redis upgrade). The trail had
its ``trust_granted`` and nothing after it, reading as if the grant were still in force; each dropped grant now
ends there too, on the chain of entries that belong to no approval, so ``hitl audit verify`` still verifies.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hitl.engine.domain.records import AuditEntry

__all__ = ["GRANT_ENDED", "UPGRADE", "UPGRADE_ACTOR", "grant_ended_at_upgrade"]

GRANT_ENDED = "trust_ended"
"""The event of a trust grant ended by something other than a person's revoke (which is ``trust_revoked``)."""
UPGRADE = "upgrade"
"""Why it ended (the entry's outcome): a store upgrade dropped it."""
UPGRADE_ACTOR = "system:upgrade"
"""Who ended it: no person, the upgrade (as ``system:expiry`` expires approvals)."""


def grant_ended_at_upgrade(*, session_id: str, tool: str, granted_by: str, until: float, now: float) -> AuditEntry:
    """The audit entry of one grant an older hitl wrote that the upgrade dropped at ``now``."""
    lapses = datetime.fromtimestamp(until, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    detail = (
        f"{tool} in {session_id}, granted by {granted_by} until {lapses}: ended by the upgrade, as it named no "
        "requester; a reviewer's Trust on a new request grants it again, for that request's requester"
    )
    return AuditEntry(at=now, actor=UPGRADE_ACTOR, event=GRANT_ENDED, outcome=UPGRADE, detail=detail)
