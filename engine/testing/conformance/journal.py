"""Conformance for a run's step boundaries (:class:`hitl.engine.ports.Journal`): all of a commit or none of it.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from typing import Any

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.journal import ClaimIntent, Commit, OutcomeRecord
from hitl.engine.domain.models import Status
from hitl.engine.domain.records import AuditEntry, ClaimState
from hitl.engine.domain.runs import StoredRun
from hitl.engine.errors import ClaimRefused, EngineError, ErrorCode, IllegalTransition, NotFound
from hitl.engine.ports import Store
from hitl.engine.receipts.claims import ISSUED_EVENT, Issued, Withdrawal, issued_entry
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.conformance.trust import grant
from hitl.engine.testing.factories import make_approval

__all__ = ["JournalConformance"]

W1, W2 = "worker-1", "worker-2"


def _cp(status: str = "running", **extra: Any) -> dict[str, Any]:
    return {"status": status, "position": 0, "waiting": None, **extra}


def _at(clock: FakeClock, *, run_id: str = "r1", holder: str = W1, **kw: Any) -> Commit:
    """A commit of ``run_id`` by ``holder`` now, with a 5 s lease."""
    return Commit(run_id=run_id, holder=holder, now=clock.now(), lease=5.0, **kw)


def _starting(clock: FakeClock, **kw: Any) -> Commit:
    """A run's first commit by :data:`W1` (see :func:`_at`): it takes the run and saves its first checkpoint."""
    return _at(clock, own=True, checkpoint=_cp(), **kw)


async def _refusal(store: Store, commit: Commit) -> EngineError:
    """What ``commit``, which must be refused, is refused with."""
    with pytest.raises(EngineError) as refused:
        await store.journal.commit(commit)
    return refused.value


async def _approved(store: Store, clock: FakeClock, **kw: Any) -> str:
    a, _ = await store.approvals.create(make_approval(now=clock.now(), **kw))
    await store.approvals.decide(cmd(a, "U_OPS"), now=clock.now())
    return a.id


class JournalConformance:
    """What every store must do here."""

    async def test_a_start_owns_saves_audits_and_claims_in_one_step(self, store: Store, clock: FakeClock) -> None:
        event = AuditEntry(at=clock.now(), actor=W1, event="run_started", detail="r1: wf")
        done = await store.journal.commit(
            _starting(clock, events=(event,), claim=ClaimIntent(key="r1:a:0", action_hash="h-a"))
        )
        assert done.applied and done.version == 1
        assert done.claim is not None and done.claim.acquired and done.claim.attempt == 1
        assert await store.runs.load("r1") == StoredRun(_cp(), 1)
        assert not await store.runs.own("r1", holder=W2, now=clock.now(), lease=5)  # owned by W1
        claim = await store.ledger.get("r1:a:0")
        assert claim is not None and claim.holder == W1 and claim.state is ClaimState.RUNNING
        assert [e.event for e in await store.audit.entries()] == ["run_started"]

    async def test_a_checkpoint_reads_back_as_the_json_value_it_was(self, store: Store, clock: FakeClock) -> None:
        """Any text, integers past 64 bits, floats, nesting: a checkpoint in JSON form (as a run writes it) reads
        back equal, through the commit and through ``open``."""
        data = _cp(
            vars={"note": 'café 東京 \u2028 "q" \\ \n', "big": 2**70, "neg": -(2**63), "f": 1e16, "tiny": 5e-324},
            outputs={"a": [1, 2.5, None, True, {"k": []}]},
        )
        done = await store.journal.commit(_at(clock, own=True, checkpoint=data))
        assert done.applied
        assert await store.runs.load("r1") == StoredRun(data, 1)
        opened = await store.journal.open("r1", holder=W1, now=clock.now(), lease=5.0)
        assert (opened.data, opened.version) == (data, 1)

    async def test_a_start_of_a_run_that_exists_writes_nothing(self, store: Store, clock: FakeClock) -> None:
        await store.runs.save("r1", _cp(), expected_version=0, now=clock.now())
        with pytest.raises(EngineError) as err:
            await store.journal.commit(
                _at(
                    clock,
                    own=True,
                    checkpoint=_cp(x=1),
                    events=(AuditEntry(at=clock.now(), actor=W1, event="run_started"),),
                    claim=ClaimIntent(key="r1:a:0", action_hash="h"),
                )
            )
        assert err.value.code is ErrorCode.STALE_VERSION
        assert await store.runs.load("r1") == StoredRun(_cp(), 1)
        assert await store.ledger.get("r1:a:0") is None
        assert await store.audit.entries() == []
        assert await store.runs.own("r1", holder=W2, now=clock.now(), lease=5)  # W1 did not take it

    async def test_only_the_owner_commits(self, store: Store, clock: FakeClock) -> None:
        await store.journal.commit(_at(clock, holder=W1, own=True, checkpoint=_cp()))
        for attempt in (
            _at(clock, holder=W2, own=True, checkpoint=_cp(x=1), expected_version=1),
            _at(clock, holder=W2, checkpoint=_cp(x=2), expected_version=1),
        ):
            with pytest.raises(EngineError) as err:
                await store.journal.commit(attempt)
            assert err.value.code is ErrorCode.CLAIM_IN_PROGRESS
        assert await store.runs.load("r1") == StoredRun(_cp(), 1)
        # W1's lease runs out: W2 may take over, and from then on W1 is fenced.
        clock.advance(6)
        await store.journal.commit(_at(clock, holder=W2, own=True, checkpoint=_cp(x=3), expected_version=1))
        with pytest.raises(EngineError):
            await store.journal.commit(_at(clock, holder=W1, checkpoint=_cp(x=4), expected_version=2))
        assert await store.runs.load("r1") == StoredRun(_cp(x=3), 2)

    async def test_a_step_records_its_outcome_saves_and_claims_the_next(self, store: Store, clock: FakeClock) -> None:
        first = await store.journal.commit(_starting(clock, claim=ClaimIntent(key="k1", action_hash="h1")))
        assert first.claim is not None
        step = await store.journal.commit(
            _at(
                clock,
                checkpoint=_cp(position=1),
                expected_version=1,
                outcome=OutcomeRecord(key="k1", attempt=first.claim.attempt, ok=True, result={"output": 7}),
                claim=ClaimIntent(key="k2", action_hash="h2"),
            )
        )
        assert step.version == 2 and step.claim is not None and step.claim.acquired
        k1 = await store.ledger.get("k1")
        assert k1 is not None and k1.state is ClaimState.SUCCEEDED and k1.result == {"output": 7}
        assert await store.runs.load("r1") == StoredRun(_cp(position=1), 2)

    async def test_a_claim_records_its_receipt_in_the_same_commit_only_for_a_new_attempt(
        self, store: Store, clock: FakeClock
    ) -> None:
        issued = Issued(jti="rct_run_1", key="k1", exp=clock.now() + 300)
        first = await store.journal.commit(
            _starting(clock, claim=ClaimIntent(key="k1", action_hash="h1", receipt=issued))
        )
        assert first.claim is not None and first.claim.acquired
        assert await store.receipts.issued("rct_run_1") == issued
        # Claimed again while it runs: not acquired, so the receipt issued for that try is not recorded.
        again = Issued(jti="rct_run_2", key="k1", exp=clock.now() + 300)
        await store.journal.commit(
            _at(
                clock,
                checkpoint=_cp(position=1),
                expected_version=1,
                claim=ClaimIntent(key="k1", action_hash="h1", receipt=again),
            )
        )
        assert await store.receipts.issued("rct_run_2") is None
        # Taken over from a holder whose lease ran out: an attempt in doubt, which gets no receipt either.
        clock.advance(3600)
        recovered = Issued(jti="rct_run_3", key="k1", exp=clock.now() + 300)
        taken = await store.journal.commit(
            _at(
                clock,
                checkpoint=_cp(position=2),
                expected_version=2,
                claim=ClaimIntent(key="k1", action_hash="h1", receipt=recovered),
                own=True,
            )
        )
        assert taken.claim is not None and taken.claim.recovered
        assert await store.receipts.issued("rct_run_3") is None

    async def test_a_receipts_issue_is_audited_by_its_commit_and_a_withdrawal_refuses_the_commit_whole(
        self, store: Store, clock: FakeClock
    ) -> None:
        approval_id = await _approved(store, clock)
        approval = await store.approvals.get(approval_id)
        batch = await store.approvals.get(await _approved(store, clock, args={"to": "V-2", "amount": 2}))

        def issued(jti: str, key: str, of: Any) -> Issued:
            entry = issued_entry(of, jti, actor=W1, now=clock.now())
            return Issued(jti=jti, key=key, exp=clock.now() + 300, audit=entry)

        def issues(of: str) -> Any:
            return store.audit.entries(approval_id=of)

        started = await store.journal.commit(
            _starting(clock, claim=ClaimIntent("k1", "h1", approval_id, receipt=issued("rct_j1", "k1", approval)))
        )
        assert started.claim is not None and started.claim.acquired
        assert [e.detail.split()[1] for e in await issues(approval_id) if e.event == ISSUED_EVENT] == ["rct_j1"]
        # A batch's item: the receipt is the batch approval's, the claim names no approval of its own.
        item = await store.journal.commit(
            _at(
                clock,
                checkpoint=_cp(position=1),
                expected_version=1,
                claim=ClaimIntent("k2", "h2", None, receipt=issued("rct_j2", "k2", batch)),
            )
        )
        assert item.claim is not None and item.claim.acquired
        assert [e.event for e in await issues(batch.id)].count(ISSUED_EVENT) == 1

        assert await store.receipts.withdraw(batch.id, now=clock.now()) is Withdrawal.WITHDRAWN
        before = len(await issues(batch.id))
        event = AuditEntry(at=clock.now(), actor=W1, event="step", detail="x")
        claim = ClaimIntent("k3", "h3", None, receipt=issued("rct_j3", "k3", batch))
        refused = await _refusal(
            store, _at(clock, checkpoint=_cp(position=2), expected_version=2, events=(event,), claim=claim)
        )
        assert refused.code is ErrorCode.ACTION_REJECTED
        # Nothing of it: no checkpoint, no event, no claim, no receipt, no audit entry.
        assert await store.runs.load("r1") == StoredRun(_cp(position=1), 2)
        assert await store.ledger.get("k3") is None and await store.receipts.issued("rct_j3") is None
        assert len(await issues(batch.id)) == before
        assert not [e for e in await store.audit.entries() if e.event == "step"]
        assert (await store.audit.verify())[1] is None

    async def test_a_commit_that_may_not_commit_says_why_though_its_receipts_approval_was_withdrawn(
        self, store: Store, clock: FakeClock
    ) -> None:
        # Every store refuses in the same order: ownership and the checkpoint's version come first, as they do for
        # any commit (a worker that lost the run hands it over quietly; one that read it stale reads it again),
        # and only a commit that may commit is refused for its receipt's withdrawn approval.
        approval = await store.approvals.get(await _approved(store, clock))
        await store.journal.commit(_starting(clock))
        assert await store.receipts.withdraw(approval.id, now=clock.now()) is Withdrawal.WITHDRAWN

        def claiming(jti: str) -> ClaimIntent:
            entry = issued_entry(approval, jti, actor=W2, now=clock.now())
            return ClaimIntent("k1", "h1", None, receipt=Issued(jti=jti, key="k1", exp=clock.now() + 300, audit=entry))

        # Another worker's lease runs; then its owner, from a checkpoint read before another was saved.
        taken = await _refusal(store, _at(clock, holder=W2, own=True, checkpoint=_cp(), claim=claiming("rct_o")))
        assert taken.code is ErrorCode.CLAIM_IN_PROGRESS
        stale = await _refusal(
            store, _at(clock, checkpoint=_cp(position=1), expected_version=7, claim=claiming("rct_s"))
        )
        assert stale.code is ErrorCode.STALE_VERSION
        assert await store.runs.load("r1") == StoredRun(_cp(), 1) and await store.ledger.get("k1") is None
        assert await store.receipts.issued("rct_o") is None and await store.receipts.issued("rct_s") is None
        # One that may commit: refused for the withdrawal.
        refused = await _refusal(
            store, _at(clock, checkpoint=_cp(position=1), expected_version=1, claim=claiming("rct_w"))
        )
        assert refused.code is ErrorCode.ACTION_REJECTED
        assert await store.runs.load("r1") == StoredRun(_cp(), 1) and await store.ledger.get("k1") is None
        assert (await store.audit.verify())[1] is None

    async def test_a_fenced_outcome_refuses_the_whole_commit(self, store: Store, clock: FakeClock) -> None:
        await store.journal.commit(_starting(clock))
        await store.ledger.claim("k1", action_hash="h1", holder="someone-else", now=clock.now(), lease=5)
        with pytest.raises(ClaimRefused) as err:
            await store.journal.commit(
                _at(
                    clock,
                    checkpoint=_cp(position=1),
                    expected_version=1,
                    outcome=OutcomeRecord(key="k1", attempt=1, ok=True, result={"output": 1}),
                    events=(AuditEntry(at=clock.now(), actor=W1, event="x"),),
                    claim=ClaimIntent(key="k2", action_hash="h2"),
                    release=True,
                )
            )
        assert err.value.code is ErrorCode.CLAIM_FENCED
        assert await store.runs.load("r1") == StoredRun(_cp(), 1)
        assert await store.ledger.get("k2") is None
        assert await store.audit.entries() == []
        assert not await store.runs.own("r1", holder=W2, now=clock.now(), lease=5)  # not released

    async def test_a_refused_claim_keeps_the_rest(self, store: Store, clock: FakeClock) -> None:
        await store.ledger.claim("k2", action_hash="other", holder="w9", now=clock.now(), lease=5)
        done = await store.journal.commit(_starting(clock, claim=ClaimIntent(key="k2", action_hash="h2")))
        assert done.applied and done.claim is None
        assert isinstance(done.claim_refused, ClaimRefused)
        assert done.claim_refused.code is ErrorCode.CLAIM_HASH_MISMATCH
        assert await store.runs.load("r1") == StoredRun(_cp(), 1)

    async def test_a_claim_moves_its_approval_to_executing_and_the_outcome_to_executed(
        self, store: Store, clock: FakeClock
    ) -> None:
        aid = await _approved(store, clock)
        await store.journal.commit(_starting(clock))
        done = await store.journal.commit(
            _at(
                clock,
                claim=ClaimIntent(key="k1", action_hash="h1", approval_id=aid),
            )
        )
        assert done.claim is not None and done.claim.acquired
        assert (await store.approvals.get(aid)).status is Status.EXECUTING
        await store.journal.commit(
            _at(
                clock,
                outcome=OutcomeRecord(key="k1", attempt=1, ok=True, result={"output": 1}, approval_id=aid),
            )
        )
        a = await store.approvals.get(aid)
        assert a.status is Status.EXECUTED
        assert [e.event for e in await store.audit.entries(approval_id=aid)][-2:] == ["executing", "executed"]

    async def test_nothing_is_claimed_on_an_approval_that_is_not_approved(self, store: Store, clock: FakeClock) -> None:
        a, _ = await store.approvals.create(make_approval(now=clock.now()))  # pending
        await store.journal.commit(_starting(clock))
        done = await store.journal.commit(
            _at(
                clock,
                claim=ClaimIntent(key="k1", action_hash="h1", approval_id=a.id),
            )
        )
        assert isinstance(done.claim_refused, IllegalTransition) and done.claim is None
        assert await store.ledger.get("k1") is None
        assert (await store.approvals.get(a.id)).status is Status.PENDING

    async def test_a_pause_creates_its_approval_with_the_checkpoint_and_lets_go(
        self, store: Store, clock: FakeClock
    ) -> None:
        ask = make_approval(now=clock.now(), session_id="r1")
        done = await store.journal.commit(
            _at(
                clock,
                own=True,
                checkpoint=_cp("paused", waiting=ask.id),
                ask=ask,
                events=(AuditEntry(at=clock.now(), actor=W1, event="run_paused"),),
                release=True,
            )
        )
        assert done.applied and done.created and done.approval == ask
        assert (await store.approvals.get(ask.id)).status is Status.PENDING
        assert [a.id for a in (await store.approvals.list_pending()).items] == [ask.id]
        due = await store.approvals.list_due_soon(now=ask.expires_at - 1)  # in the due-soon index too
        assert [a.id for a in due] == [ask.id]
        assert await store.runs.paused() == ["r1"]
        assert [e.event for e in await store.audit.entries(approval_id=ask.id)] == ["created"]
        assert await store.runs.own("r1", holder=W2, now=clock.now(), lease=5)  # released
        # The run's approval is what opening it for a resume hands back, with the checkpoint.
        await store.runs.release("r1", holder=W2)
        opened = await store.journal.open("r1", holder=W1, now=clock.now(), lease=5)
        assert opened.version == 1 and opened.data["waiting"] == ask.id
        assert opened.waiting is not None and opened.waiting.id == ask.id and opened.trusted == frozenset()

    async def test_asking_again_for_a_decided_action_writes_nothing(self, store: Store, clock: FakeClock) -> None:
        aid = await _approved(store, clock, session_id="r1")
        ask = make_approval(now=clock.now(), session_id="r1")
        assert ask.id == aid
        done = await store.journal.commit(
            _at(
                clock,
                own=True,
                checkpoint=_cp("paused", waiting=aid),
                ask=ask,
                release=True,
            )
        )
        assert not done.applied and done.approval is not None and done.approval.status is Status.APPROVED
        assert await store.runs.load("r1") is None
        # Still pending: the run pauses on the approval it already had.
        ask2 = make_approval(now=clock.now(), session_id="r2", key="other")
        await store.approvals.create(ask2)
        again = await store.journal.commit(
            _at(
                clock,
                run_id="r2",
                own=True,
                checkpoint=_cp("paused", waiting=ask2.id),
                ask=ask2,
                release=True,
            )
        )
        assert again.applied and not again.created and again.approval is not None
        assert again.approval.id == ask2.id and await store.runs.paused() == ["r2"]

    async def test_open_takes_the_run_and_reads_its_trust(self, store: Store, clock: FakeClock) -> None:
        with pytest.raises(NotFound, match="hitl sessions list"):  # the same words on every store
            await store.journal.open("nope", holder=W1, now=clock.now(), lease=5)
        await store.runs.save("r1", _cp("paused", requester="agent:riley"), expected_version=0, now=clock.now())
        now = clock.now()
        await store.trust.grant(grant("r1", "refund", until=now + 60, requester="agent:riley", by="U_OPS"), now=now)
        await store.trust.grant(grant("r1", "old", until=now - 1, requester="agent:riley", by="U_OPS"), now=now)
        await store.trust.grant(grant("r1", "pay", until=now + 60, requester="agent:other", by="U_OPS"), now=now)
        opened = await store.journal.open("r1", holder=W1, now=clock.now(), lease=5)
        # The run's own requester's grants count; another identity's grant in the same session does not.
        assert opened.waiting is None and opened.trusted == frozenset({"refund"})
        assert opened.grants == frozenset({("agent:riley", "refund"), ("agent:other", "pay")})
        with pytest.raises(EngineError) as err:
            await store.journal.open("r1", holder=W2, now=clock.now(), lease=5)
        assert err.value.code is ErrorCode.CLAIM_IN_PROGRESS
