"""Conformance for the audit log and the message map.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.decide import NO_VIEW
from hitl.engine.domain.models import Status
from hitl.engine.domain.presentation import digest_of, present
from hitl.engine.domain.records import AuditEntry, MessageRef
from hitl.engine.errors import EngineError, NotFound
from hitl.engine.ports import Store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.conformance.trust import grant
from hitl.engine.testing.factories import make_approval

__all__ = ["RecordsConformance"]


class RecordsConformance:
    """What every store must do here."""

    async def test_audit_is_ordered_and_messages_map_both_ways(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now())
        await store.approvals.create(a)
        await store.audit.append(AuditEntry(at=clock.advance(1), actor="runner", event="note", approval_id=a.id))
        await store.audit.append(AuditEntry(at=clock.advance(1), actor="cli", event="auto_approve", detail="ci"))
        everything = await store.audit.entries()
        assert [e.event for e in everything][-3:] == ["created", "note", "auto_approve"]
        ref = MessageRef(channel="C123", ts="1700000000.000100")
        assert await store.messages.get(a.id) is None
        await store.messages.set(a.id, ref)
        assert await store.messages.get(a.id) == ref
        assert await store.messages.approval_for(ref) == a.id
        assert await store.messages.approval_for(MessageRef(channel="C123", ts="1")) is None

    async def test_one_message_can_show_several_approvals(self, store: Store, clock: FakeClock) -> None:
        members = [make_approval(now=clock.now(), key=f"group-{i}") for i in range(3)]
        for a in members:
            await store.approvals.create(a)
        group = MessageRef(channel="C123", ts="1700000000.000400")
        alone = MessageRef(channel="C123", ts="1700000000.000500")
        for a in members[:2]:
            await store.messages.set(a.id, group)
        await store.messages.set(members[2].id, alone)
        first_two = sorted(a.id for a in members[:2])
        assert await store.messages.shown_on(group) == first_two  # sorted by id, whatever order they were set in
        assert await store.messages.shown_on(alone) == [members[2].id]
        assert await store.messages.shown_on(MessageRef(channel="C123", ts="1")) == []
        assert await store.messages.approval_for(group) == first_two[0]
        assert [await store.messages.get(a.id) for a in members] == [group, group, alone]
        shown = await store.messages.card(members[1].id)
        assert shown is not None and shown[0] == group and shown[1].id == members[1].id

    async def test_a_card_is_read_with_the_approval_it_shows(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now(), key="card")
        await store.approvals.create(a)
        assert await store.messages.card(a.id) is None  # no card posted yet
        ref = MessageRef(channel="C123", ts="1700000000.000200")
        await store.messages.set(a.id, ref)
        assert await store.messages.card(a.id) == (ref, a)
        decided = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.advance(1))
        shown = await store.messages.card(a.id)
        assert shown is not None
        assert shown[0] == ref and shown[1] == decided  # the approval as it now stands, not as it was carded
        assert (shown[1].status, shown[1].version) == (Status.APPROVED, a.version + 1)
        # A card recorded for an approval the store does not hold (purged meanwhile) is not shown as anything.
        await store.messages.set("apr_gone", MessageRef(channel="C123", ts="1700000000.000300"))
        with pytest.raises(NotFound, match="hitl pending"):  # the same words on every store, with where to look
            await store.messages.card("apr_gone")
        with pytest.raises(NotFound, match="hitl pending"):
            await store.approvals.get("apr_gone")

    async def test_every_entry_is_chained_and_the_chains_verify(self, store: Store, clock: FakeClock) -> None:
        a = make_approval(now=clock.now(), key="chain")
        await store.approvals.create(a)
        decided = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.advance(1))
        await store.approvals.transition(
            a.id, target=Status.EXECUTING, expected_version=decided.version, actor="w", now=clock.advance(1)
        )
        await store.audit.append(AuditEntry(at=clock.advance(1), actor="w", event="note", approval_id=a.id))
        await store.trust.grant(grant("s1", "refund", until=clock.now() + 60), now=clock.now())
        await store.audit.append(AuditEntry(at=clock.advance(1), actor="cli", event="forced_resume", detail="x"))
        mine = await store.audit.entries(approval_id=a.id)
        assert [e.event for e in mine] == ["created", "decided", "executing", "note"]
        assert mine[0].prev == "" and all(e.link for e in mine)
        assert [e.prev for e in mine[1:]] == [e.link for e in mine[:-1]]
        checked, broken = await store.audit.verify()
        assert broken is None and checked == 6

    async def test_a_decision_keeps_the_view_its_decider_saw(self, store: Store, clock: FakeClock) -> None:
        """The decided entry holds the canonical view and its digest, chained and checked by verify; a decision
        that names none says "no view shown"; a refusal keeps no view."""
        a = make_approval(now=clock.now(), key="seen", quorum=2, args={"customer_id": "C-ü\u202e", "amount": 1e-7})
        await store.approvals.create(a)
        view = present(a).canonical()
        first = await store.approvals.decide(cmd(a, "U_SUPPORT1", view=view), now=clock.advance(1))
        await store.approvals.decide(cmd(first, "U_SUPPORT2"), now=clock.advance(1))
        with pytest.raises(EngineError):
            await store.approvals.decide(cmd(first, "U_SUPPORT2", view=view), now=clock.advance(1))
        seen, blind, refused = (await store.audit.entries(approval_id=a.id))[1:]
        assert (seen.view, seen.view_digest) == (view, digest_of(view)) and NO_VIEW not in seen.detail
        assert (blind.view, blind.view_digest) == (None, None) and blind.detail.endswith(f"-> approved; {NO_VIEW}")
        assert refused.event == "refused" and refused.view is None
        assert await store.audit.verify() == (4, None)

    async def test_caller_chosen_ids_never_reach_another_record(self, store: Store, clock: FakeClock) -> None:
        """Ids a caller chooses (a session or run id, an idempotency key, a call id), with every separator a store
        uses in its keys, each name their own record: none reaches another id's, or another kind's."""
        now = clock.now()
        odd = ["a:b", "a", "{a}", "a}:{b", "a:{b}", "%3A", ":", "run:{a}", "claim:{a}", "call:a", "notify:a"]
        for i, name in enumerate(odd):
            await store.runs.save(name, {"status": "paused", "n": i}, expected_version=0, now=now)
            claim = await store.ledger.claim(name, action_hash=f"h{i}", holder=f"w{i}", now=now, lease=60)
            assert claim.acquired
        for i, name in enumerate(odd):
            run = await store.runs.load(name)
            assert run is not None and run.data["n"] == i
            found = await store.ledger.get(name)
            assert found is not None and (found.action_hash, found.holder) == (f"h{i}", f"w{i}")
        made = [make_approval(now=now, session_id=name, key=f"call-{name}") for name in odd]
        for a in made:
            stored, created = await store.approvals.create(a)
            assert created and stored == a
        assert len({a.id for a in made}) == len(odd)
        assert await store.alerts.load("a") is None  # a run named like an alert is not one
