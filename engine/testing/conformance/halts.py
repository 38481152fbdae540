"""Conformance for the stop switch's orders.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder, covering
from hitl.engine.ports import Store

__all__ = ["HaltsConformance"]


class HaltsConformance:
    """What every store must do here."""

    async def test_orders_are_given_replaced_and_lifted_once_each_audited(self, store: Store, clock: FakeClock) -> None:
        assert await store.halts.active() == []
        refund = HaltOrder(scope="refund", by="U_ADMIN", reason="refunds look wrong", at=clock.now())
        await store.halts.halt(refund)
        assert await store.halts.active() == [refund]
        clock.advance(1)
        again = refund.model_copy(update={"reason": "still wrong", "at": clock.now()})
        await store.halts.halt(again)  # one order per scope: replaced
        every = HaltOrder(scope=EVERY_TOOL, by="U_ADMIN2", at=clock.now())
        await store.halts.halt(every)
        orders = await store.halts.active()
        assert orders == [every, again]  # by scope
        assert covering(orders, "refund") == again and covering(orders, "send_email") == every
        clock.advance(1)
        assert await store.halts.lift("refund", by="U_ADMIN3", now=clock.now()) == again
        assert await store.halts.lift("refund", by="U_ADMIN3", now=clock.now()) is None  # lifted once
        assert await store.halts.lift("never", by="U_ADMIN3", now=clock.now()) is None
        assert await store.halts.active() == [every]
        trail = [(e.event, e.actor, e.detail) for e in await store.audit.entries() if "halted" in e.event]
        assert trail == [
            ("halted", "U_ADMIN", "refund: refunds look wrong"),
            ("halted", "U_ADMIN", "refund: still wrong"),
            ("halted", "U_ADMIN2", "*"),
            ("unhalted", "U_ADMIN3", "refund"),
        ]
        checked, broken = await store.audit.verify()
        assert broken is None and checked >= 4
