"""Conformance for the approval store's filtered listing (:meth:`~hitl.engine.ports.ApprovalStore.list_matching`):
each filter alone and combined, pages full and in order, the cursor while rows are added, date bounds, empty
answers, practice twins like any approval. Part of
:class:`~hitl.engine.testing.conformance.approvals.ApprovalsConformance`.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Status, Tier
from hitl.engine.errors import DecisionRefused, EngineError
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.factories import make_approval

__all__ = ["ApprovalFiltersConformance"]

_TOOLS = ("refund", "delete_customer", "lookup")
_TIERS = (Tier.APPROVE, Tier.ESCALATE, Tier.NOTIFY)
_REQUESTERS = ("agent:riley", "agent:sam", "U_ASKER")


async def _history(store: Store, clock: FakeClock, n: int = 48) -> list[Approval]:
    """``n`` approvals of mixed tools, tiers and requesters (some created at the same instant, the id breaks the
    tie), a third approved by U_A, a sixth rejected by U_B, some with a first vote of two by U_C (still pending),
    one expired, one cancelled, a practice twin among them; each as stored now."""
    made: list[Approval] = []
    for i in range(n):
        a = make_approval(
            now=clock.advance(0 if i % 7 == 3 else 1.000123456789),
            key=f"f{i}",
            tool=_TOOLS[i % 3],
            tier=_TIERS[(i // 3) % 3],
            requester=_REQUESTERS[(i // 2) % 3],
            quorum=2 if i % 6 == 5 else 1,
            ttl=5 if i == 2 else 86_400,
        )
        if i == 10:  # a practice twin: listed and filtered like any other approval
            a = a.model_copy(update={"kind": ApprovalKind.PRACTICE})
        await store.approvals.create(a)
        made.append(a)
    for i, a in enumerate(made):
        if i % 3 == 0:
            await store.approvals.decide(cmd(a, "U_A"), now=clock.now())
        elif i % 6 == 1:
            await store.approvals.decide(cmd(a, "U_B", DecisionKind.REJECT, reason="no"), now=clock.now())
        elif i % 6 == 5:
            await store.approvals.decide(cmd(a, "U_C"), now=clock.now())  # one vote of two: still pending
    await store.approvals.transition(
        made[8].id, target=Status.CANCELLED, expected_version=None, actor="agent", now=clock.now()
    )
    await store.approvals.expire_due(now=made[2].expires_at + 1)
    # A refused vote records no decision: U_D's refusal must not make U_D a reviewer of the approval.
    with pytest.raises(DecisionRefused):
        await store.approvals.decide(cmd(made[0], "U_D"), now=clock.now())
    return [await store.approvals.get(a.id) for a in made]


def _newest_first(found: list[Approval], where: ApprovalFilter) -> list[str]:
    return [a.id for a in sorted(found, key=lambda a: (a.created_at, a.id), reverse=True) if where.keeps(a)]


async def _walk(store: Store, where: ApprovalFilter, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await store.approvals.list_matching(where, limit=limit, cursor=cursor)
        pages.append([a.id for a in page.items])
        if page.cursor is None:
            return pages
        cursor = page.cursor
        assert len(pages) < 100, "the cursor never ends"


FILTERS = (
    ApprovalFilter(),
    ApprovalFilter(tool="refund"),
    ApprovalFilter(tier=Tier.ESCALATE),
    ApprovalFilter(requester="agent:sam"),
    ApprovalFilter(reviewer="U_A"),
    ApprovalFilter(reviewer="U_B"),
    ApprovalFilter(reviewer="U_C"),
    ApprovalFilter(status=Status.PENDING),
    ApprovalFilter(status=Status.REJECTED),
    ApprovalFilter(status=Status.EXPIRED),
    ApprovalFilter(status="decided"),
    ApprovalFilter(tool="delete_customer", status="decided"),
    ApprovalFilter(tool="refund", tier=Tier.APPROVE, requester="agent:riley"),
    ApprovalFilter(reviewer="U_A", tool="refund", tier=Tier.NOTIFY),
    ApprovalFilter(reviewer="U_C", status=Status.PENDING, requester="U_ASKER"),
    ApprovalFilter(tier=Tier.NOTIFY, status=Status.CANCELLED),
)
"""Each filter alone, then combined (with the reviewer's own index among them)."""


class ApprovalFiltersConformance:
    """What every store must do to list approvals by filters."""

    async def test_each_filter_alone_and_combined_lists_every_match_newest_first(
        self, store: Store, clock: FakeClock
    ) -> None:
        found = await _history(store, clock)
        for where in FILTERS:
            expected = _newest_first(found, where)
            assert expected, f"the history holds a match for {where}"
            pages = await _walk(store, where, limit=4)
            assert [aid for page in pages for aid in page] == expected, where
            # Full pages: every page but the last holds `limit` rows (no store stops short at this size).
            assert all(len(page) == 4 for page in pages[:-1]), where

    async def test_the_reviewer_filter_names_votes_and_decisions_not_refusals(
        self, store: Store, clock: FakeClock
    ) -> None:
        found = await _history(store, clock)
        voted = (await store.approvals.list_matching(ApprovalFilter(reviewer="U_C"), limit=50)).items
        assert voted and all(a.status is Status.PENDING for a in voted)  # a first vote of two
        assert [a.id for a in voted] == _newest_first(found, ApprovalFilter(reviewer="U_C"))
        assert (await store.approvals.list_matching(ApprovalFilter(reviewer="U_D"), limit=50)).items == []

    async def test_practice_twins_are_listed_like_any_approval(self, store: Store, clock: FakeClock) -> None:
        found = await _history(store, clock)
        twin = next(a for a in found if a.kind is ApprovalKind.PRACTICE)
        where = ApprovalFilter(tool=twin.tool, tier=twin.tier, requester=twin.requester)
        listed = (await store.approvals.list_matching(where, limit=50)).items
        assert twin.id in [a.id for a in listed]
        assert [a.id for a in listed] == _newest_first(found, where)

    async def test_date_bounds_take_from_inclusive_and_before_exclusive(self, store: Store, clock: FakeClock) -> None:
        found = await _history(store, clock)
        times = sorted({a.created_at for a in found})
        lo, hi = times[5], times[20]
        where = ApprovalFilter(created_from=lo, created_before=hi)
        listed = [aid for page in await _walk(store, where, limit=3) for aid in page]
        assert listed == [
            a.id for a in sorted(found, key=lambda a: (a.created_at, a.id), reverse=True) if lo <= a.created_at < hi
        ]
        assert any(a.created_at == lo for a in found if a.id in listed)
        assert not any(a.created_at == hi for a in found if a.id in listed)
        for where in (
            ApprovalFilter(reviewer="U_A", created_from=lo, created_before=hi),
            ApprovalFilter(tool="refund", status="decided", created_from=lo),
            ApprovalFilter(requester="agent:riley", created_before=hi),
        ):
            assert [aid for page in await _walk(store, where, limit=2) for aid in page] == _newest_first(found, where)

    async def test_no_match_is_an_empty_last_page(self, store: Store, clock: FakeClock) -> None:
        found = await _history(store, clock)
        late = max(a.created_at for a in found) + 1
        for where in (
            ApprovalFilter(tool="no_such_tool"),
            ApprovalFilter(requester="nobody"),
            ApprovalFilter(reviewer="U_NOBODY"),
            ApprovalFilter(tool="lookup", tier=Tier.SELF),
            ApprovalFilter(created_from=late),
            ApprovalFilter(reviewer="U_A", created_from=late),
            ApprovalFilter(status=Status.EXECUTED),
        ):
            page = await store.approvals.list_matching(where, limit=10)
            assert (page.items, page.cursor) == ([], None), where
        with pytest.raises(EngineError):
            await store.approvals.list_matching(ApprovalFilter(), cursor="garbage-cursor")

    async def test_the_cursor_has_no_duplicates_and_no_gaps_while_rows_are_added(
        self, store: Store, clock: FakeClock
    ) -> None:
        found = await _history(store, clock)
        for where in (ApprovalFilter(tool="refund"), ApprovalFilter(reviewer="U_A"), ApprovalFilter(status="decided")):
            found = [await store.approvals.get(a.id) for a in found]  # with the rows the walk before added
            expected = _newest_first(found, where)
            seen: list[str] = []
            cursor: str | None = None
            while True:
                page = await store.approvals.list_matching(where, limit=3, cursor=cursor)
                seen += [a.id for a in page.items]
                # Between pages, newer matching rows arrive (and one is decided by U_A): the walk goes on where
                # it was, each row it started with listed once.
                extra = make_approval(now=clock.advance(1), key=f"late{len(seen)}{where.status}{where.reviewer}")
                await store.approvals.create(extra)
                found.append(await store.approvals.decide(cmd(extra, "U_A"), now=clock.now()))
                if page.cursor is None:
                    break
                cursor = page.cursor
            assert seen == expected, where
