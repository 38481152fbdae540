"""Halt notices: when the stop switch's orders change (given or lifted in any process), the cards of the pending
approvals they cover are brought up to date ahead of every routine update, and the Home tabs are told."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.updates import CardUpdates
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder, acted_on
from hitl.engine.storage.paging import every_pending

__all__ = ["HaltNotices"]


class HaltNotices:
    """Watches the stop switch's orders as this process reads them."""

    def __init__(self, floor: Floor, updates: CardUpdates) -> None:
        self.floor = floor
        self.updates = updates
        self.on_halts: list[Callable[[], Awaitable[None]]] = []
        """Called when the stop switch's orders changed (the Home tabs show them)."""
        self._halts: dict[str, HaltOrder] | None = None

    async def watch(self) -> None:
        """Bring the cards the changed orders cover up to date (urgently), and tell the halt listeners."""
        orders = {o.scope: o for o in await self.floor.switch.orders()}
        before, self._halts = self._halts or {}, orders
        if before == orders:
            return  # at start, cards drawn before a halt given while no server ran are brought up to date
        changed = {s for s in set(before) | set(orders) if before.get(s) != orders.get(s)}
        async for a in every_pending(self.floor.store.approvals):
            if EVERY_TOOL in changed or acted_on(a) in changed:
                await self.updates.queue_urgent(a)  # a halt notice: ahead of routine updates
        self.updates.kick()
        for listener in self.on_halts:
            await listener()
