"""Conformance for session trust grants.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.ports import Store

__all__ = ["TrustConformance"]


class TrustConformance:
    """What every store must do here."""

    async def test_trust_grants_expire_and_revoke(self, store: Store, clock: FakeClock) -> None:
        await store.trust.grant("s1", "refund", until=clock.now() + 60, by="U_SUPPORT1", now=clock.now())
        await store.trust.grant("s1", "email", until=clock.now() + 600, by="U_SUPPORT1", now=clock.now())
        assert [g.tool for g in await store.trust.active("s1", now=clock.now())] == ["email", "refund"]
        assert await store.trust.active("s2", now=clock.now()) == []
        await store.trust.grant("s2", "email", until=clock.now() + 60, by="U_SUPPORT2", now=clock.now())
        assert [(g.session_id, g.tool) for g in await store.trust.all_active(now=clock.now())] == [
            ("s1", "email"),
            ("s1", "refund"),
            ("s2", "email"),
        ]
        clock.advance(61)
        assert [g.tool for g in await store.trust.active("s1", now=clock.now())] == ["email"]
        assert await store.trust.revoke("s1", "email", by="U_SUPPORT2", now=clock.now())
        assert not await store.trust.revoke("s1", "email", by="U_SUPPORT2", now=clock.now())
        assert await store.trust.active("s1", now=clock.now()) == []
        assert [(g.session_id, g.tool) for g in await store.trust.all_active(now=clock.now())] == []
