"""What one step boundary of a run writes, as one atomic store operation (the :class:`~hitl.engine.ports.Journal` port).

A run used to write each thing on its own: the outcome of the effect it ran, its checkpoint, an audit line, the
claim of the next effect, the approval it pauses on, the release of its ownership. Each was a round trip, and a
crash between two of them left a state that recovery had to reason about. A :class:`Commit` carries all of a step
boundary's writes, and the store applies them together or not at all:

* preconditions first: the committer owns the run (or takes it with ``own``), its checkpoint is still at
  ``expected_version``, the outcome's claim is still its own (not fenced). Any failing refuses the whole commit
  with the usual error, and nothing is written;
* then, in one transaction or script: the outcome (and ``executing -> executed`` of its approval), the checkpoint,
  the run-level audit entries, the approval it asks for, the claim of the next effect (and ``approved ->
  executing`` of its approval), the release of ownership.

A refused *claim* does not refuse the rest: the outcome and checkpoint before it stand, and the refusal is returned
for the runner to act on. An *ask* that finds its approval already decided (the same action asked before, and
answered) applies nothing, so the run can go on with that answer instead of pausing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.execution import check_checkpoint_version, not_owner
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, Claim, Issued
from hitl.engine.errors import EngineError

__all__ = ["ClaimIntent", "Commit", "Committed", "Opened", "OutcomeRecord", "committable_version", "held_by_another"]


@dataclass(frozen=True, slots=True)
class ClaimIntent:
    """Claim the next effect under its idempotency key (see :meth:`~hitl.engine.ports.ExecutionLedger.claim`).

    ``approval_id``: the approval the effect runs under. The claim is refused unless it is ``approved`` (moved to
    ``executing`` with the claim) or already ``executing`` (a retry); a claim that finds the effect already done
    moves it to ``executed``.
    """

    key: str
    action_hash: str
    approval_id: str | None = None
    retry_failed: bool = True
    receipt: Issued | None = None
    """The receipt issued with this claim: recorded in the same commit when it is acquired for a new attempt, with
    its audit entry (:attr:`~hitl.engine.receipts.claims.Issued.audit`), whose approval, withdrawn, refuses the
    whole commit (``action_rejected``)."""


@dataclass(frozen=True, slots=True)
class OutcomeRecord:
    """The outcome of the effect the committer holds (fenced: refused unless ``attempt`` still holds ``key``).
    ``approval_id``: moved ``executing -> executed`` when the outcome is a success."""

    key: str
    attempt: int
    ok: bool
    result: dict[str, Any]
    approval_id: str | None = None


@dataclass(frozen=True)
class Commit:
    """Everything one step boundary of run ``run_id`` writes (see the module docstring for the rules).

    Args:
        run_id: the run (its session id).
        holder: the worker driving it: run owner, claim holder, actor of the approval transitions.
        now: the time of the commit.
        lease: seconds the run's ownership and the claim stay valid unrenewed.
        own: take ownership of the run (refused while another holder's lease is live); otherwise the committer
            must already own it.
        checkpoint: the run's new checkpoint (``None``: unchanged); saved if the stored one is still at
            ``expected_version`` (0 for a run that does not exist yet).
        outcome: the outcome of the effect just run.
        events: run-level audit entries (entries that belong to no approval).
        ask: an approval the run pauses on: created (or found: ids derive from the dedupe key). When it is then
            pending, everything is applied; when it was found already decided, nothing is.
        claim: the next effect's claim.
        release: give up ownership at the end (the run paused or ended).
    """

    run_id: str
    holder: str
    now: float
    lease: float
    own: bool = False
    checkpoint: dict[str, Any] | None = None
    expected_version: int = 0
    outcome: OutcomeRecord | None = None
    events: tuple[AuditEntry, ...] = ()
    ask: Approval | None = None
    claim: ClaimIntent | None = None
    release: bool = False


@dataclass(frozen=True)
class Committed:
    """What a :class:`Commit` did."""

    applied: bool
    """False only when ``ask`` found its approval already decided (then nothing was written)."""
    version: int
    """The checkpoint's version after the commit."""
    claim: Claim | None = None
    """The claim's answer: ``acquired`` (run the effect), or the recorded outcome of an effect already done."""
    claim_refused: EngineError | None = None
    """Why the claim was refused (held by another worker, another action under the key, approval not approved)."""
    approval: Approval | None = None
    """The asked approval as stored (new, or found)."""
    created: bool = False


@dataclass(frozen=True)
class Opened:
    """A run taken over for resuming: its checkpoint, the approval it waits on, its session's trust grants."""

    data: dict[str, Any]
    version: int
    waiting: Approval | None
    grants: frozenset[tuple[str, str]]
    """The session's grants in force, as ``(requester, tool)``: the store reads them with the checkpoint, in one
    step, before it knows who the run's requester is."""

    @property
    def trusted(self) -> frozenset[str]:
        """The tools trusted for the run's own requester in its session (another identity's grants do not count)."""
        requester = self.data.get("requester")
        return frozenset(tool for who, tool in self.grants if who == requester)


def held_by_another(owner: str | None, until: float | None, *, holder: str, now: float) -> bool:
    """Whether run ownership is held by someone other than ``holder`` whose lease still runs at ``now`` (then
    ``holder`` may not take the run over)."""
    return owner is not None and owner != holder and until is not None and until > now


def committable_version(m: Commit, holder: str | None, lease_until: float | None, stored: int | None) -> int:
    """The run's checkpoint version if ``m`` may commit, given its owner now (``holder``, whose lease runs until
    ``lease_until``) and its stored version; raises what refuses the whole commit (nothing of it is written): a
    commit that takes the run over is refused while another holder's lease runs, any other unless its writer owns
    the run, and a checkpoint unless it was read at the version stored."""
    if m.own:
        if held_by_another(holder, lease_until, holder=m.holder, now=m.now):
            raise not_owner(m.run_id, holder)
    elif holder != m.holder:
        raise not_owner(m.run_id, holder)
    version = int(stored) if stored is not None else 0
    if m.checkpoint is not None:
        check_checkpoint_version(m.run_id, version, m.expected_version)
    return version
