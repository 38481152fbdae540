"""Hypothesis drives random operation sequences against each real store, with the pure domain as the model.

Invariants: the store agrees with the domain after every step, no state outside the table is reached,
the version counts state changes, and every operation leaves exactly one audit entry. Runs' fused commits (claim an
effect under an approval, record its outcome) move approvals by the same table.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from hitl.engine.domain.decide import DecideCommand, apply_decision, apply_expiry
from hitl.engine.domain.execution import transitioned
from hitl.engine.domain.journal import ClaimIntent, Commit, OutcomeRecord
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status
from hitl.engine.domain.states import TRANSITIONS
from hitl.engine.errors import EngineError, IllegalTransition
from hitl.engine.ports import Store
from hitl.engine.storage.redis import RedisStore, connect
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock, make_approval

PEOPLE = {
    "U_SUPPORT1": frozenset({"support"}),
    "U_SUPPORT2": frozenset({"support"}),
    "U_FIN1": frozenset({"finance"}),
    "U_FIN2": frozenset({"finance"}),
    "U_STRANGER": frozenset(),
    "agent:riley": frozenset({"support"}),
}
KINDS = [DecisionKind.APPROVE, DecisionKind.REJECT, DecisionKind.TRUST, DecisionKind.MODIFY]


def machine_for(make_store: Any) -> type[RuleBasedStateMachine]:
    class StoreMachine(RuleBasedStateMachine):
        @initialize()
        def setup(self) -> None:
            self.loop = asyncio.new_event_loop()
            self.store: Store = self.loop.run_until_complete(make_store())
            self.clock = FakeClock()
            self.model: dict[str, Approval] = {}
            self.ops: dict[str, int] = {}

        def run(self, aw: Any) -> Any:
            return self.loop.run_until_complete(aw)

        def teardown(self) -> None:
            if hasattr(self, "store"):
                self.run(self.store.close())
                self.loop.close()

        @rule(
            quorum=st.integers(1, 2),
            role=st.sampled_from(["support", "finance", None]),
            ttl=st.integers(5, 50),
            trustable=st.booleans(),
        )
        def create(self, quorum: int, role: str | None, ttl: int, trustable: bool) -> None:
            a = make_approval(
                now=self.clock.now(),
                key=uuid.uuid4().hex,
                quorum=quorum,
                role=role,
                ttl=ttl,
                trustable=trustable,
            )
            stored, created = self.run(self.store.approvals.create(a))
            assert created
            self.model[a.id] = stored
            self.ops[a.id] = 1

        @rule(
            data=st.data(),
            who=st.sampled_from(sorted(PEOPLE)),
            kind=st.sampled_from(KINDS),
            skew=st.sampled_from([0, 0, 0, -1, 1]),
            bad_hash=st.booleans(),
            supersede=st.booleans(),
        )
        def decide(
            self,
            data: st.DataObject,
            who: str,
            kind: DecisionKind,
            skew: int,
            bad_hash: bool,
            supersede: bool,
        ) -> None:
            if not self.model:
                return
            aid = data.draw(st.sampled_from(sorted(self.model)))
            cur = self.model[aid]
            cmd = DecideCommand(
                approval_id=aid,
                reviewer=Reviewer(id=who, roles=PEOPLE[who]),
                kind=kind,
                expected_version=cur.version + skew,
                expected_hash="0" * 64 if bad_hash and skew == 0 else cur.action_hash,
                reason="r" if kind is DecisionKind.REJECT else None,
                args={"amount": 1} if kind is DecisionKind.MODIFY else None,
                supersede_with="apr_NEXT" if kind is DecisionKind.MODIFY and supersede else None,
            )
            now = self.clock.now()
            try:
                expected: Approval | EngineError = apply_decision(cur, cmd, now)
            except EngineError as exc:
                expected = exc
            try:
                got: Approval | EngineError = self.run(self.store.approvals.decide(cmd, now=now))
            except EngineError as exc:
                got = exc
            self.ops[aid] += 1
            if isinstance(expected, EngineError):
                assert isinstance(got, EngineError) and got.code is expected.code
            else:
                assert got == expected
                self.model[aid] = expected

        @rule(seconds=st.integers(1, 30))
        def expire(self, seconds: int) -> None:
            now = self.clock.advance(seconds)
            expired = {a.id for a in self.run(self.store.approvals.expire_due(now=now, limit=1000))}
            want = {aid for aid, a in self.model.items() if apply_expiry(a, now) is not None}
            assert expired == want
            for aid in want:
                self.model[aid] = self.run(self.store.approvals.get(aid))
                self.ops[aid] += 1

        @rule(
            data=st.data(),
            dest=st.sampled_from([Status.EXECUTING, Status.EXECUTED, Status.FAILED, Status.CANCELLED]),
        )
        def move(self, data: st.DataObject, dest: Status) -> None:
            if not self.model:
                return
            aid = data.draw(st.sampled_from(sorted(self.model)))
            cur, now = self.model[aid], self.clock.now()
            try:
                expected: Approval | EngineError = transitioned(
                    cur, target=dest, expected_version=cur.version, now=now, reason=None
                )
            except EngineError as exc:
                expected = exc
            try:
                got: Approval | EngineError = self.run(
                    self.store.approvals.transition(
                        aid, target=dest, expected_version=cur.version, actor="runner", now=now
                    )
                )
            except EngineError as exc:
                got = exc
            if isinstance(expected, EngineError):
                assert isinstance(got, EngineError) and got.code is expected.code
            else:
                assert got == expected
                self.model[aid] = expected
                self.ops[aid] += 1

        @rule(data=st.data(), finish=st.booleans())
        def run_effect(self, data: st.DataObject, finish: bool) -> None:
            """A run claims an effect under an approval in one commit (approved -> executing with the claim; nothing
            claimed on an approval in any other state), then records its success (executing -> executed)."""
            if not self.model:
                return
            aid = data.draw(st.sampled_from(sorted(self.model)))
            cur, now = self.model[aid], self.clock.now()
            run, key = f"run-{uuid.uuid4().hex[:8]}", f"key-{uuid.uuid4().hex[:8]}"
            begun = self.run(
                self.store.journal.commit(
                    Commit(
                        run_id=run,
                        holder="w",
                        now=now,
                        lease=60,
                        own=True,
                        checkpoint={"status": "running"},
                        claim=ClaimIntent(key, "h", aid),
                    )
                )
            )
            if cur.status not in (Status.APPROVED, Status.EXECUTING):
                assert isinstance(begun.claim_refused, IllegalTransition) and begun.claim is None
                assert self.run(self.store.ledger.get(key)) is None
                return
            assert begun.claim is not None and begun.claim.acquired
            self.model[aid] = transitioned(
                cur, target=Status.EXECUTING, expected_version=cur.version, now=now, reason=None
            )
            self.ops[aid] += 1
            if finish:
                outcome = OutcomeRecord(key, begun.claim.attempt, True, {"output": 1}, aid)
                self.run(
                    self.store.journal.commit(
                        Commit(run_id=run, holder="w", now=now, lease=60, outcome=outcome, release=True)
                    )
                )
                self.model[aid] = transitioned(
                    self.model[aid],
                    target=Status.EXECUTED,
                    expected_version=self.model[aid].version,
                    now=now,
                    reason=None,
                )
                self.ops[aid] += 1

        @invariant()
        def agrees_and_audits(self) -> None:
            if not hasattr(self, "store"):
                return
            for aid, want in self.model.items():
                got = self.run(self.store.approvals.get(aid))
                assert got == want and got.status in TRANSITIONS
                log = self.run(self.store.audit.entries(approval_id=aid))
                assert len(log) == self.ops[aid], (aid, [e.event for e in log])
                assert log[0].event == "created"

    return StoreMachine


SETTINGS = settings(
    max_examples=25, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_sqlite_store_never_reaches_an_illegal_state() -> None:
    with tempfile.TemporaryDirectory() as d:

        async def make() -> Store:
            return SqliteStore(Path(d) / f"{uuid.uuid4().hex}.db")

        run_state_machine_as_test(machine_for(make), settings=SETTINGS)


def test_redis_store_never_reaches_an_illegal_state(redis_url: str) -> None:
    async def make() -> Store:
        return RedisStore(connect(redis_url), prefix=f"sm{uuid.uuid4().hex[:8]}")

    run_state_machine_as_test(machine_for(make), settings=SETTINGS)
