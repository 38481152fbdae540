"""Conformance for the approval store's queues: pending pages (filters, cursors), the ranked order, the due-soon
index and recent history. Part of :class:`~hitl.engine.testing.conformance.approvals.ApprovalsConformance`.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.models import Approval, Status, Tier
from hitl.engine.domain.ranking import due_soon, due_soon_at, rank_key
from hitl.engine.errors import EngineError
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.factories import make_approval

__all__ = ["ApprovalQueuesConformance"]


class ApprovalQueuesConformance:
    """What every store must do to list approvals: pages, ranks, due soon, recent."""

    async def test_list_pending_pages_filters_and_skips_decided(self, store: Store, clock: FakeClock) -> None:
        made = []
        for i in range(120):
            role = "finance" if i % 3 == 0 else "support"
            a = make_approval(
                # Shared and fractional creation times: a page's cursor must resume exactly after its last item.
                now=clock.advance(0 if i % 5 == 2 else 1.000123456789),
                key=f"p{i}",
                role=role,
                requester="U_SUPPORT2" if i % 10 == 0 else "agent:riley",
            )
            await store.approvals.create(a)
            made.append(a)
        await store.approvals.decide(cmd(made[1], "U_SUPPORT1"), now=clock.now())
        seen, cursor = [], None
        while True:
            page = await store.approvals.list_pending(limit=50, cursor=cursor)
            seen += [a.id for a in page.items]
            if page.cursor is None:
                break
            cursor = page.cursor
        order = sorted(range(len(made)), key=lambda i: (made[i].created_at, made[i].id))  # oldest first, ties by id
        assert seen == [made[i].id for i in order if i != 1]
        support = await store.approvals.list_pending(roles=["support"], exclude_requester="U_SUPPORT2", limit=200)
        expected = [made[i].id for i in order if i % 3 and i % 10 and i != 1]
        assert [a.id for a in support.items] == expected and support.cursor is None
        with pytest.raises(EngineError):
            await store.approvals.list_pending(cursor="garbage-cursor")

    async def test_ranked_pages_put_the_most_important_first(self, store: Store, clock: FakeClock) -> None:
        # Tiers, ratios and deadlines mixed, with ties on each (ids break them), across roles: every page follows
        # the one before exactly, and a role's reviewer sees their ranked part of the same order.
        made = []
        for i in range(90):
            a = make_approval(
                now=clock.advance(1),
                key=f"k{i}",
                tier=Tier.ESCALATE if i % 7 == 0 else Tier.APPROVE,
                role="finance" if i % 4 == 0 else None,
                ttl=600.0 * (i % 5 + 1),
                requester="U_ASKER" if i % 9 == 0 else "agent:riley",
            ).model_copy(update={"ratio": None if i % 3 == 0 else (i % 6) * 1.5})
            await store.approvals.create(a)
            made.append(a)
        await store.approvals.decide(cmd(made[5], "U_SUPPORT1"), now=clock.now())
        expected = sorted((a for a in made if a is not made[5]), key=lambda a: (rank_key(a), a.id))
        seen, cursor = [], None
        while True:
            page = await store.approvals.list_pending(limit=16, cursor=cursor, order="rank")
            seen += [a.id for a in page.items]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert seen == [a.id for a in expected]
        assert {a.tier for a in expected[:13]} == {Tier.ESCALATE}  # every escalation before any approve
        mine = await store.approvals.list_pending(roles=[], exclude_requester="U_ASKER", limit=200, order="rank")
        assert [a.id for a in mine.items] == [
            a.id for a in expected if a.required_role is None and a.requester != "U_ASKER"
        ]
        assert await store.approvals.count_pending(roles=[], exclude_requester="U_ASKER") == len(mine.items)
        assert await store.approvals.count_pending() == 89
        assert await store.approvals.count_pending(cap=10) == 10
        with pytest.raises(EngineError):  # a cursor continues only its own order
            await store.approvals.list_pending(cursor="1.0|x", order="rank")
        with pytest.raises(EngineError):
            await store.approvals.list_pending(cursor="r5|x")

    async def test_due_soon_are_found_wherever_the_rank_puts_them(self, store: Store, clock: FakeClock) -> None:
        # Escalations with days to go fill the ranked pages; the few approvals due soon (a short timeout, or a
        # tenth of a long one left), made first and last, are found at once, those due soon longest first.
        start = clock.now()
        calm = [make_approval(now=start + i, key=f"calm{i}", tier=Tier.ESCALATE, ttl=86400.0 * 3) for i in range(60)]
        short = make_approval(now=start - 1, key="short", ttl=300.0)  # due soon from the start: under 10 min
        week = make_approval(now=start - 604800 + 3600, key="week", role="finance", ttl=604800.0)  # 1 h of 7 days
        late = make_approval(now=start + 100, key="late", ttl=1200.0, requester="U_ASKER")  # due soon at +700
        handed = make_approval(now=start - 1, key="handed", role="legal", ttl=500.0).model_copy(
            update={"backup_role": "finance", "hand_on_at": start + 50}
        )
        for a in [short, week, *calm, late, handed]:
            await store.approvals.create(a)
        first = await store.approvals.list_pending(limit=20, order="rank")
        assert {a.id for a in first.items}.isdisjoint({short.id, week.id, late.id})  # escalations fill the page

        async def due(now: float, **kw: object) -> list[str]:
            return [a.id for a in await store.approvals.list_due_soon(now=now, **kw)]  # type: ignore[arg-type]

        def by_soon(*made: Approval) -> list[str]:
            return [a.id for a in sorted(made, key=lambda a: (due_soon_at(a), a.id))]

        assert await due(start + 200) == by_soon(short, week, handed)  # late has 1000 s left, over 10 min
        assert await due(start + 701) == by_soon(short, week, late, handed)
        assert await due(start + 701, limit=2) == by_soon(short, week, late, handed)[:2]
        assert await due(start + 701, roles=["support"], exclude_requester="U_ASKER") == [short.id]
        assert await due(start + 10, roles=["finance"]) == [week.id]  # not handed on yet
        assert await due(start + 60, roles=["finance"]) == by_soon(week, handed)
        await store.approvals.decide(cmd(short, "U_SUPPORT1"), now=start + 200)
        assert await due(start + 701) == by_soon(week, late, handed)  # decided: due soon no more
        assert all(not due_soon(a, now=start + 701) for a in calm)
        soonest_calm = await due(start + 86400 * 2.7 + 60, roles=["support"], exclude_requester="U_ASKER", limit=1)
        assert soonest_calm == [calm[0].id]

    async def test_list_recent_pages_newest_first_by_status(self, store: Store, clock: FakeClock) -> None:
        made = []
        for i in range(90):
            a = make_approval(now=clock.advance(0 if i % 4 == 1 else 1), key=f"r{i}")  # some share a time
            await store.approvals.create(a)
            made.append(a)
        for a in made[::3]:
            await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        newest_first = sorted(made, key=lambda a: (a.created_at, a.id), reverse=True)

        async def all_of(status: Status | None, limit: int) -> list[str]:
            seen, cursor = [], None
            for _ in range(1000):
                page = await store.approvals.list_recent(status=status, limit=limit, cursor=cursor)
                assert len(page.items) <= limit
                seen += [a.id for a in page.items]
                if page.cursor is None:
                    return seen
                cursor = page.cursor
            raise AssertionError("the cursor never ended")

        assert await all_of(None, 7) == [a.id for a in newest_first]
        approved = {a.id for a in made[::3]}
        assert await all_of(Status.APPROVED, 5) == [a.id for a in newest_first if a.id in approved]
        assert await all_of(Status.PENDING, 50) == [a.id for a in newest_first if a.id not in approved]
        assert await all_of(Status.EXPIRED, 10) == []
        first = await store.approvals.list_recent(status=Status.APPROVED, limit=1)
        assert first.items[0].status is Status.APPROVED and first.items[0].version == 2
        with pytest.raises(EngineError):
            await store.approvals.list_recent(cursor="garbage-cursor")
