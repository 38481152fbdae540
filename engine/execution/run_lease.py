"""One drive of one run by this worker: its ownership and the writes waiting for the run's next commit.

A run's writes between two store operations (its checkpoint, the outcome of the effect it just ran, its audit
lines) are held here and written with the next operation the run cannot do without: the claim of its next effect,
the approval it pauses on, or its end (see :mod:`hitl.engine.domain.journal`). So a step costs one round trip, and
there is no moment at which a step's outcome is recorded but its checkpoint is not.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hitl.engine.domain.journal import ClaimIntent, Commit, Committed, OutcomeRecord
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.runs import RunState
from hitl.engine.ports import Clock, Store

__all__ = ["RunLease"]


@dataclass
class RunLease:
    """The run ``state`` as driven by ``holder``.

    Args:
        state: the run (its ``version`` follows the commits).
        owned: True once the run is this worker's (opened for a resume, or after a start's first commit).
        waiting: the approval the run waited on, as read when it was opened (used once, instead of reading it).
        trusted: the session's trusted tools as read when it was opened (``None``: not read; ask the store).
    """

    store: Store
    clock: Clock
    holder: str
    lease: float
    state: RunState
    owned: bool = False
    waiting: Approval | None = None
    trusted: frozenset[str] | None = None
    dirty: bool = False
    """The checkpoint changed since it was last written."""
    outcome: OutcomeRecord | None = None
    events: list[AuditEntry] = field(default_factory=list)
    asks: dict[str, Approval] = field(default_factory=dict)
    """Approvals proposed but not yet stored, by id: the pause of the step that asked creates each, with the
    checkpoint."""
    answered: dict[str, Approval] = field(default_factory=dict)
    """Approvals a pause found already answered (the same action asked before): the step goes on with them."""
    committed: bool = False
    """True once anything was written (a start whose first commit is refused never existed)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Steps running at the same time (parallel branches, workers) share the run: one commit at a time."""

    @property
    def pending(self) -> bool:
        """Writes are waiting for a commit."""
        return self.dirty or self.outcome is not None or bool(self.events)

    async def commit(
        self, *, claim: ClaimIntent | None = None, ask: Approval | None = None, release: bool = False
    ) -> Committed:
        """Write what waits, with ``claim``/``ask``/``release``, in one atomic store operation."""
        async with self.lock:
            return await self._commit(claim, ask, release)

    async def hold(self, outcome: OutcomeRecord) -> None:
        """Keep an effect's outcome for the next commit (writing the one held before first, if another step's
        effect left one: a commit carries one outcome)."""
        async with self.lock:
            if self.outcome is not None:
                await self._commit(None, None, False)
            self.outcome = outcome

    async def _commit(self, claim: ClaimIntent | None, ask: Approval | None, release: bool) -> Committed:
        state = self.state
        commit = Commit(
            run_id=state.session_id,
            holder=self.holder,
            now=self.clock.now(),
            lease=self.lease,
            own=not self.owned,
            checkpoint=state.model_dump(mode="json", exclude={"version"}) if self.dirty or not self.owned else None,
            expected_version=state.version,
            outcome=self.outcome,
            events=tuple(self.events),
            ask=ask,
            claim=claim,
            release=release,
        )
        done = await self.store.journal.commit(commit)
        if done.applied:
            state.version = done.version
            self.dirty, self.outcome, self.events, self.committed = False, None, [], True
            self.owned = not release
        return done
