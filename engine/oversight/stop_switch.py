"""The stop switch as every gate reads it: the store's halt orders, read again at most every half second, so an
order given in any process on the store reaches every replica and agent process within one second.

A gate asks :meth:`StopSwitch.check` before it lets anything new through (a proposal, an approval, an execution);
reading the orders failing means nothing goes through (fail closed: the store's error propagates).
"""

from __future__ import annotations

import weakref

from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder, covering, halt_message
from hitl.engine.errors import Halted, InvalidInput
from hitl.engine.oversight.freshness import FRESH_FOR, FreshRead, shared_per_store
from hitl.engine.ports import Clock, Store

__all__ = ["StopSwitch", "halted"]

_SHARED: weakref.WeakKeyDictionary[Store, StopSwitch] = weakref.WeakKeyDictionary()


class StopSwitch:
    """Halt orders: given, lifted, and checked by the gates. One per store in a process (:meth:`shared`), so an
    order given here holds at once for every service of the process."""

    @classmethod
    def shared(cls, store: Store, clock: Clock) -> StopSwitch:
        """The process's switch for ``store``."""
        return shared_per_store(_SHARED, store, lambda: cls(store, clock))

    def __init__(self, store: Store, clock: Clock, *, fresh_for: float = FRESH_FOR) -> None:
        self.store = store
        self.clock = clock
        self._orders = FreshRead(lambda: store.halts.active(), fresh_for=fresh_for)

    async def orders(self) -> list[HaltOrder]:
        """The orders in force (as read at most half a second ago)."""
        return await self._orders.get()

    async def orders_now(self) -> list[HaltOrder]:
        """The orders in force as the store holds them now: for a person's decision, which is rare and must agree
        with the page or card that already says "Stopped" (another process's halt reaches the cached read within
        half a second; a decision must not slip through in between)."""
        return await self.store.halts.active()

    def clear(self) -> bool:
        """Whether the orders, read from the store less than half a second ago, are none: True lets a caller skip
        :meth:`covering` (False says only that it must ask)."""
        return self._orders.held() == []

    async def covering(self, tool: str) -> HaltOrder | None:
        """The order that halts ``tool``, if any."""
        orders = await self.orders()
        return covering(orders, tool) if orders else None

    async def check(self, tool: str) -> None:
        """Raise :class:`Halted` when an order covers ``tool``."""
        order = await self.covering(tool)
        if order is not None:
            raise halted(order, tool)

    async def halt(self, scope: str | None, *, by: str, reason: str = "") -> HaltOrder:
        """Halt ``scope`` (a tool; None or ``*``: every tool), audited; in force here at once."""
        order = HaltOrder(scope=_scope(scope), by=by[:200], reason=reason.strip()[:1000], at=self.clock.now())
        await self.store.halts.halt(order)
        self._orders.forget()
        return order

    async def lift(self, scope: str | None, *, by: str) -> HaltOrder | None:
        """Lift the order for ``scope``, audited; the order lifted, or None when there was none."""
        lifted = await self.store.halts.lift(_scope(scope), by=by[:200], now=self.clock.now())
        self._orders.forget()
        return lifted


def halted(order: HaltOrder, tool: str) -> Halted:
    """The refusal a halt order gives ``tool``."""
    return Halted(halt_message(order, tool), tool=tool, scope=order.scope, halted_by=order.by)


def _scope(scope: str | None) -> str:
    value = (scope or EVERY_TOOL).strip()
    if not value or len(value) > 200 or any(ord(ch) < 32 for ch in value):
        raise InvalidInput("a halt names one tool (at most 200 characters) or none for every tool")
    return value
