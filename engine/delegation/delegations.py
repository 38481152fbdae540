"""Delegations as every surface uses them: given, ended and listed through one object, and read by reviewer
resolution (:class:`DelegatedReviewers`) again at most every half second, so a delegation ended in any process on
the store stops handing anything on in every replica within one second.

What a delegation may be is :mod:`hitl.engine.domain.delegation`'s; what the store keeps is
:class:`~hitl.engine.ports.DelegationStore`'s.
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hitl.engine.delegation.delegates import DelegateRule
from hitl.engine.domain.delegation import Delegation, acting_reviewer, delegation_problem, utc_text
from hitl.engine.domain.models import Reviewer
from hitl.engine.errors import InvalidInput, NotFound
from hitl.engine.oversight.freshness import FRESH_FOR, FreshRead, shared_per_store
from hitl.engine.ports import Clock, ReviewerDirectory, Store

__all__ = ["DelegatedReviewers", "Delegations"]

_SHARED: weakref.WeakKeyDictionary[Store, Delegations] = weakref.WeakKeyDictionary()


class Delegations:
    """The delegations of one store, for one process (:meth:`shared`): a change made here holds here at once.

    ``on_change`` callbacks hear of each delegation given, ended or run out here (the Slack app redraws both
    people's Home tabs)."""

    @classmethod
    def shared(cls, store: Store, clock: Clock) -> Delegations:
        """The process's delegations of ``store``."""
        return shared_per_store(_SHARED, store, lambda: cls(store, clock))

    def __init__(self, store: Store, clock: Clock, *, fresh_for: float = FRESH_FOR) -> None:
        self.store = store
        self.clock = clock
        self.on_change: list[Callable[[Delegation], Awaitable[None]]] = []
        # Read as of the clock's now: which of them are in force is decided again at each use.
        self._found = FreshRead(lambda: store.delegations.active(now=clock.now()), fresh_for=fresh_for)

    async def in_force(self) -> list[Delegation]:
        """The delegations in force (as read at most half a second ago; the clock decides which still are)."""
        now = self.clock.now()
        return [d for d in await self._found.get() if d.in_force(now)]

    async def give(
        self, delegator: Reviewer, delegate: str, *, until: float, role: str | None, via: str, rule: DelegateRule
    ) -> Delegation:
        """Hand ``role`` (None: all) of ``delegator`` (with the roles they hold in their own right) to ``delegate``
        until ``until``, audited; :class:`InvalidInput` saying why not (too long, a role they lack, themselves, one
        already in force, or, coded ``invalid_delegate``, someone ``rule`` refuses)."""
        now = self.clock.now()
        problem = delegation_problem(delegator=delegator, delegate=delegate, role=role, until=until, now=now)
        if problem is not None:
            raise InvalidInput(problem, delegator=delegator.id, delegate=delegate)
        await rule.check(delegate)
        given = Delegation(
            id=f"dlg_{secrets.token_hex(6)}",
            delegator=delegator.id,
            delegate=delegate,
            role=role,
            given_at=now,
            until=until,
            via=via,
        )
        standing = await self.store.delegations.give(given, now=now)
        if standing is not None:
            raise InvalidInput(
                f"{delegator.id} already delegates to {standing.delegate} until {utc_text(standing.until)} "
                f"({standing.id}); end it first (`/hitl delegate end`, `hitl delegate end`)",
                delegation=standing.id,
            )
        await self._changed(given)
        return given

    async def end(self, by: str, delegation_id: str | None = None, *, admin: bool = False) -> Delegation:
        """End the delegation ``delegation_id`` (None: the one ``by`` gave), audited; its delegator, its delegate or
        an ``admin`` may. :class:`NotFound` when there is none in force that they may end."""
        now = self.clock.now()
        found = await self.store.delegations.active(now=now)
        if delegation_id is None:
            mine = [d for d in found if d.delegator == by]
        else:
            mine = [d for d in found if d.id == delegation_id and (admin or by in (d.delegator, d.delegate))]
        ended = await self.store.delegations.end(mine[0].id, by=by, now=now) if mine else None
        if ended is None:
            what = f"delegation {delegation_id!r} that you may end" if delegation_id else "delegation given by you"
            raise NotFound(f"no {what} is in force; list them with `/hitl delegations` or `hitl delegate list`")
        await self._changed(ended)
        return ended

    async def of(self, person: str) -> tuple[Delegation | None, list[Delegation]]:
        """What concerns ``person`` now: the delegation they gave (None), and those handed to them."""
        found = await self.in_force()
        given = next((d for d in found if d.delegator == person), None)
        return given, [d for d in found if d.delegate == person]

    async def sweep(self) -> None:
        """Record the end of every delegation whose time ran out (each once, across replicas), audited."""
        for ended in await self.store.delegations.lapsed(now=self.clock.now()):
            await self._changed(ended)

    async def _changed(self, d: Delegation) -> None:
        self._found.forget()
        for hear in list(self.on_change):
            await hear(d)


@dataclass(frozen=True)
class DelegatedReviewers:
    """A reviewer directory (:class:`~hitl.engine.ports.ReviewerDirectory`) that adds to ``inner``'s reviewer what
    the delegations in force hand them: each delegated role (one their delegator holds in their own right, in
    ``inner``), whom it came from, and who is one person with them (:func:`acting_reviewer`)."""

    inner: ReviewerDirectory
    delegations: Delegations

    async def reviewer(self, reviewer_id: str) -> Reviewer:
        """``reviewer_id`` with their own roles and any a delegation in force hands them."""
        me = await self.inner.reviewer(reviewer_id)
        found = await self.delegations.in_force()
        if not found:
            return me
        own = {d.delegator: (await self.inner.reviewer(d.delegator)).roles for d in found if d.delegate == me.id}
        now = self.delegations.clock.now()
        return acting_reviewer(me, found, now=now, own_roles=lambda who: own.get(who, frozenset()))
