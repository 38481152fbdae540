"""Ports: what the engine needs from the outside context, as ``typing.Protocol``s.

The store is sixteen narrow ports, one per concern (the receipts' ledger is in :mod:`hitl.engine.receipts.ports`), that
a backend implements as small classes sharing one connection and assembles into one :class:`Store` facade
(``store.approvals``, ``store.ledger``, ...): callers pass one object, each piece of code depends on the part it uses.
Stores live in ``hitl.engine.storage``, clocks in ``hitl.engine.clocks``, the notifier and run reporter in ``bot``.
Arguments after the first are keyword-only. A store method fails as :class:`~hitl.engine.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.delegation import Delegation
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.journal import Commit, Committed, Opened
from hitl.engine.domain.models import Approval, Reviewer, Status
from hitl.engine.domain.policy import WindowStats
from hitl.engine.domain.ranking import PendingOrder
from hitl.engine.domain.records import AuditBreak, AuditEntry, Claim, Job, MessageRef, Page, TrustGrant
from hitl.engine.domain.retention import Purged, Retention
from hitl.engine.domain.runs import RunResult, StoredRun
from hitl.engine.domain.tally import TallyKey
from hitl.engine.receipts.claims import Issued
from hitl.engine.receipts.ports import ReceiptLedger

__all__ = [
    "AlertStates",
    "ApprovalStore",
    "AuditLog",
    "CallHolds",
    "Clock",
    "DelegationStore",
    "ExecutionLedger",
    "HaltOrders",
    "JobQueue",
    "Journal",
    "MessageMap",
    "Notifier",
    "Purger",
    "RateWindows",
    "ReviewerDirectory",
    "RunReporter",
    "RunStore",
    "Store",
    "Tallies",
    "TrustStore",
    "Workspace",
]


@runtime_checkable
class Clock(Protocol):
    """Source of the current time in epoch seconds (UTC)."""

    def now(self) -> float: ...


class ApprovalStore(Protocol):
    """Approvals and their state machine. ``decide``, ``expire_due`` and ``transition`` are compare-and-swap
    steps: exactly one of any set of racing callers wins, and each is audited in the same atomic step."""

    async def create(self, approval: Approval) -> tuple[Approval, bool]:
        """Store ``approval`` unless one with its id exists; returns the stored one and whether it is new.

        Approval ids derive from the dedupe key, so re-asking the same action returns the same approval. An id
        that is taken by an approval with another dedupe key (a collision) is refused with ``id_collision``.
        """
        ...

    async def get(self, approval_id: str) -> Approval:
        """The approval, or :class:`~hitl.engine.errors.NotFound`."""
        ...

    async def list_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        order: PendingOrder = "age",
        now: float | None = None,
    ) -> Page:
        """Pending approvals, oldest first (``order="rank"``: most important first, by the rank stored with each,
        :mod:`~hitl.engine.domain.ranking`); cost depends on ``limit``, not on the total. A cursor continues only
        the order it came from. ``roles``: those a reviewer of these roles may decide, with, given ``now``, those
        handed on to one of them by then (their ``backup_role``)."""
        ...

    async def count_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        cap: int = 1000,
        now: float | None = None,
    ) -> int:
        """How many approvals :meth:`list_pending` would list with these filters, counted up to ``cap`` (a larger
        number is returned as ``cap``): how much waits on a reviewer, at a cost bounded by ``cap``."""
        ...

    async def list_due_soon(
        self, *, now: float, roles: Collection[str] | None = None, exclude_requester: str | None = None, limit: int = 50
    ) -> list[Approval]:
        """Pending approvals :func:`~hitl.engine.domain.ranking.due_soon` at ``now``, filtered as :meth:`list_pending`,
        due soon longest first, at most ``limit``; indexed, so the cost depends on ``limit``, not on the total."""
        ...

    async def list_recent(self, *, status: Status | None = None, limit: int = 50, cursor: str | None = None) -> Page:
        """Approvals newest first, all or of one ``status`` (decided ones included), paged. A page may hold fewer
        than ``limit`` items (a store may stop scanning early): follow the cursor until it is None."""
        ...

    async def list_matching(self, where: ApprovalFilter, *, limit: int = 50, cursor: str | None = None) -> Page:
        """Approvals ``where`` keeps, newest first, paged as :mod:`~hitl.engine.domain.approval_filter` says."""

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        """Apply one decision atomically or raise :class:`~hitl.engine.errors.DecisionRefused`. Both are audited."""
        ...

    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        """Return the approval once its version passes ``after_version``, or as it is after ``timeout`` seconds."""
        ...

    async def wait_created(self, *, timeout: float) -> list[str]:
        """Ids of approvals created by any process since this store object's previous call (the first call only
        starts watching and returns none), waiting up to ``timeout`` seconds for one: how ``hitl serve`` cards an
        approval another process created at once. A wake-up can be lost (a dropped connection); callers keep a
        slower sweep as the safety net."""
        ...

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        """Expire pending approvals whose deadline passed; returns those this call expired."""
        ...

    async def transition(
        self,
        approval_id: str,
        *,
        target: Status,
        expected_version: int | None,
        actor: str,
        now: float,
        reason: str | None = None,
        superseded_by: str | None = None,
    ) -> Approval:
        """Move an approval along the state machine (cancel, executing, executed, failed; a drift's ones), audited."""


class ExecutionLedger(Protocol):
    """Execution claims under idempotency keys: exactly one claimant runs an effect (see :class:`Claim`)."""

    async def claim(
        self,
        key: str,
        *,
        action_hash: str,
        holder: str,
        now: float,
        lease: float,
        retry_failed: bool = False,
        receipt: Issued | None = None,
    ) -> Claim:
        """Claim the execution under ``key``. With ``receipt``: a claim acquired for a new attempt (not one
        recovered from a holder that died) records the receipt's issue, and its audit entry, in the same atomic step;
        any other answer records nothing. See :attr:`~hitl.engine.receipts.claims.Issued.audit` for withdrawals."""
        ...

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        """Record the outcome of the current attempt; a fenced (superseded) holder is refused."""
        ...

    async def renew(self, key: str, *, holder: str, attempt: int, now: float, lease: float) -> bool:
        """Extend a running claim's lease while its effect runs; False when ``holder`` no longer holds it."""
        ...

    async def get(self, key: str) -> Claim | None: ...


@runtime_checkable
class ReviewerDirectory(Protocol):
    """Who a person is as a reviewer: their id with the roles they hold now.

    One protocol, three directories: the roles of ``hitl.yaml`` (``ConfiguredReviewers``), the same roles with
    Slack user groups expanded (the bot's ``SlackReviewers``), and an API token's reviewer
    narrowed to the token's roles (the API's ``TokenReviewers``). A surface resolves the person through its
    directory; the service decides with the :class:`Reviewer` it returns (a stranger holds no role).
    """

    async def reviewer(self, reviewer_id: str) -> Reviewer:
        """The reviewer ``reviewer_id`` with their roles; :class:`~hitl.engine.errors.InvalidInput` for an id that
        cannot be one (empty, control characters)."""
        ...


class Workspace(Protocol):
    """Who is a person of the chat workspace (the bot asks Slack's ``users.info``): someone a delegation may be handed
    to though ``hitl.yaml`` does not list them. ``hitl serve`` has one; the CLI against the store has none."""

    async def active_person(self, user_id: str) -> bool:
        """Whether ``user_id`` is an active human member (not deleted, not a bot or an app); False when the workspace
        does not know them or cannot say (fail closed)."""
        ...


class RunStore(Protocol):
    """Run checkpoints, saved by compare-and-swap on their version, and run ownership.

    A run that is being driven is owned by one worker through a lease it renews. A run whose checkpoint says
    ``running`` and whose owner's lease passed (the worker died mid-step or between steps) is an orphan: another
    worker takes it over. Ownership decides who drives; the checkpoint's version still fences every save.
    """

    async def save(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        """Save a checkpoint if its version is still ``expected_version`` (0 for a new run); the new version."""
        ...

    async def load(self, run_id: str) -> StoredRun | None:
        """The run's record and its version, or None when there is none."""
        ...

    async def paused(self, *, limit: int = 500, after: str | None = None) -> list[str]:
        """Ids of runs whose last checkpoint says ``paused``, in id order after ``after`` (page through all)."""
        ...

    async def own(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        """Take (or keep) ownership of ``run_id`` unless another holder's lease is still live."""
        ...

    async def renew(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        """Extend ``holder``'s lease; False when it no longer owns the run."""
        ...

    async def release(self, run_id: str, *, holder: str) -> None:
        """Give the run up (it paused or ended); a no-op unless ``holder`` owns it."""
        ...

    async def orphaned(self, *, now: float, limit: int = 100) -> list[str]:
        """Runs whose checkpoint says ``running`` and that no live lease owns, longest-abandoned first."""
        ...


class Journal(Protocol):
    """A run's step boundaries, each one atomic store operation (see :mod:`hitl.engine.domain.journal`): the outcome
    of the effect just run, the checkpoint, audit lines, the approval it pauses on, the next effect's claim and
    the release of ownership, written together or not at all."""

    async def commit(self, commit: Commit) -> Committed:
        """Apply ``commit`` atomically, or raise (:class:`~hitl.engine.errors.StaleVersion`: the checkpoint moved or
        another worker owns the run; :class:`~hitl.engine.errors.ClaimRefused`: the outcome's claim was fenced) having
        written nothing. A refused claim is returned, not raised."""
        ...

    async def open(self, run_id: str, *, holder: str, now: float, lease: float) -> Opened:
        """Take ownership of a run to resume it, and read its checkpoint, the approval it waits on and its
        session's trusted tools, in one step. :class:`~hitl.engine.errors.NotFound` when there is no such run;
        ``claim_in_progress`` while another worker's lease on it is live."""
        ...


class JobQueue(Protocol):
    """Durable background jobs (resume a run, update a card), delivered at least once."""

    async def enqueue(self, kind: str, payload: dict[str, Any], *, now: float) -> str: ...

    async def claim(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        """Jobs of ``kind`` for ``consumer``: new ones, and ones another consumer claimed over ``lease`` seconds
        ago without acknowledging (it crashed). Handlers must be idempotent."""
        ...

    async def ack(self, *job_ids: str) -> None:
        """Mark jobs done, all in one step (one round trip, however many): none is delivered again. A consumer that
        handled a batch acknowledges it at once; acknowledging nothing does nothing."""
        ...

    async def settle(self, kind: str, *, approval_id: str) -> int:
        """Mark done every open job of ``kind`` queued for ``approval_id``: follow-up work the deciding process
        finished itself (the CLI resumes a run inline; the resume queued with the decision is then moot). The number
        settled; a job a consumer holds meanwhile is harmless (handlers are idempotent)."""
        ...


class TrustStore(Protocol):
    """Trust grants ("approve and stop asking for this tool"), each for one requester in one session, with a
    deadline. A reviewer's Trust writes its grant in the decision's atomic step (:meth:`ApprovalStore.decide`);
    :meth:`grant` is for an operator who grants outside a decision."""

    async def grant(self, grant: TrustGrant, *, now: float) -> None:
        """Write ``grant`` (replacing the same requester's grant of the tool in the session), audited."""
        ...

    async def active(self, session_id: str, *, requester: str, now: float) -> list[TrustGrant]:
        """The grants in force for ``requester`` in ``session_id``, by tool."""
        ...

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        """Grants in force across sessions and requesters (for ``/hitl trust list``; callers show each only to
        people who may decide its tool)."""
        ...

    async def revoke(self, session_id: str, tool: str, *, requester: str | None = None, by: str, now: float) -> int:
        """End the grants of ``tool`` in ``session_id`` (only ``requester``'s when given), audited: how many ended."""
        ...


class DelegationStore(Protocol):
    """Delegations (:mod:`hitl.engine.domain.delegation`): each given and ended in one atomic step with its audit
    entry, kept after it ends (the audit names it by id), read by every process on the store."""

    async def give(self, delegation: Delegation, *, now: float) -> Delegation | None:
        """Write ``delegation``, audited as ``delegated``, unless its delegator already has one in force at ``now``:
        then write nothing and return that one (None when it was written)."""
        ...

    async def end(self, delegation_id: str, *, by: str, now: float) -> Delegation | None:
        """End the delegation ``delegation_id`` if it is in force, audited as ``delegation_ended``: the delegation as
        ended, or None when none by that id was in force."""
        ...

    async def active(self, *, now: float) -> list[Delegation]:
        """Every delegation in force at ``now``, by when it was given."""
        ...

    async def lapsed(self, *, now: float, limit: int = 100) -> list[Delegation]:
        """End the delegations whose time ran out by ``now`` and whose end is not recorded yet (``ended_by`` is
        ``expiry``, ``ended_at`` their ``until``), each audited once as ``delegation_ended``: the ones ended."""
        ...


class HaltOrders(Protocol):
    """The stop switch's orders: each given and lifted in one atomic step with its audit entry, kept until lifted
    (restarts included), read by every process on the store."""

    async def halt(self, order: HaltOrder) -> None:
        """Give (or replace) the order for ``order.scope``; audited as ``halted``."""
        ...

    async def lift(self, scope: str, *, by: str, now: float) -> HaltOrder | None:
        """Lift the order for ``scope``; audited as ``unhalted``. The order lifted, or None when there was none."""
        ...

    async def active(self) -> list[HaltOrder]:
        """Every order in force, by scope."""
        ...


class AlertStates(Protocol):
    """Each alert's state (firing or not, its episode), saved compare-and-swap on its version, in a space of its
    own: no run, session or other id a caller chooses can reach it (it once lived beside the runs)."""

    async def load(self, name: str) -> StoredRun | None:
        """The alert's state and its version, or None before it was first saved."""
        ...

    async def save(self, name: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        """Save the state if its version is still ``expected_version`` (0 for the first save): the new version, or
        :class:`~hitl.engine.errors.StaleVersion` (another replica saved first)."""
        ...


class CallHolds(Protocol):
    """Holds an outside service put on a kind of call (Slack's ``Retry-After`` on a method, or a method and channel),
    kept where every replica and every process on the store honours them, not only the one that was told."""

    async def hold(self, key: str, *, until: float) -> None:
        """Hold calls of kind ``key`` until ``until`` (epoch seconds); a later hold already kept stands."""
        ...

    async def active(self, *, now: float) -> dict[str, float]:
        """Every hold still running at ``now``: its key and when it ends. Ended holds may be purged here."""
        ...


class RateWindows(Protocol):
    """Rolling windows for velocity and rolling-sum rules."""

    async def add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        """Atomically read the window's prior stats and add this event to it (an event counts once). An event
        already in the window is not added again: its stats are the ones it found when it was first counted
        (``added`` False), so the same call asked again is judged as it was judged, whatever came after it."""
        ...

    async def stats(self, key: str, *, now: float, window: float, exclude: str = "") -> WindowStats:
        """The window's count and sum, leaving out the event ``exclude`` (an action an edit would replace)."""
        ...

    async def forget(self, key: str, *, event_id: str) -> None:
        """Remove one event from a window (its action ended without running); nothing when it is not there."""
        ...


class AuditLog(Protocol):
    """The append-only audit trail."""

    async def append(self, entry: AuditEntry) -> None: ...

    async def entries(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        """Audit entries, oldest first."""
        ...

    async def verify(self, *, head: str | None = None) -> tuple[int, AuditBreak | None]:
        """Check every chain (one per approval, one for entries that belong to no approval) and its head: how many
        entries were checked, and the first break, if any (a changed or moved entry, a removed tail). With ``head``
        (a digest :meth:`take_head` returned), also that every entry recorded before it was taken is still there."""
        ...

    async def take_head(self) -> str:
        """Record every chain's head under one digest and return it, for the operator to keep outside the store
        (see :mod:`hitl.engine.domain.audit_heads`)."""
        ...


class Tallies(Protocol):
    """The counts behind the HITL metrics (:mod:`hitl.engine.domain.tally`), shared by every replica.

    ``add`` may hold counts for a few seconds before writing them (a metric is not worth a round trip on an
    allowed call's fast path); ``flush`` writes what is held, and a store's ``close`` flushes.
    """

    async def add(self, counts: Mapping[TallyKey, float], *, now: float) -> None: ...

    async def flush(self) -> None: ...

    async def read(self, *, since: float, now: float) -> dict[tuple[str, str, str], float]:
        """Counts summed over the hours from ``since`` to ``now``, by (tool, tier, field)."""
        ...


class Purger(Protocol):
    """Retention: removes what ended longer ago than a :class:`~hitl.engine.domain.retention.Retention` keeps, and the
    audit chains past its audit horizon, tamper-evidently (see :mod:`hitl.engine.domain.retention`)."""

    async def purge(self, retention: Retention, *, now: float, actor: str = "retention", limit: int = 500) -> Purged:
        """Remove up to about ``limit`` records of each kind; what was removed. Call again until it removes
        nothing. Anything removed is audited, in a run-level ``purged`` entry naming the counts."""
        ...

    async def due(self, retention: Retention, *, now: float) -> Purged:
        """What purging at ``now`` until nothing is left would remove, removing nothing (``hitl purge --dry-run``)."""
        ...


class MessageMap(Protocol):
    """Where each approval's card was posted, both ways. One message may show several approvals (a group card)."""

    async def set(self, approval_id: str, ref: MessageRef) -> None:
        """Record that ``ref`` shows ``approval_id`` (several approvals may share one message)."""
        ...

    async def get(self, approval_id: str) -> MessageRef | None: ...

    async def card(self, approval_id: str) -> tuple[MessageRef, Approval] | None:
        """Where the approval's card is and the approval as it now stands, read together (a card update's one
        read); None when no card was recorded for it, :class:`~hitl.engine.errors.NotFound` when the approval is
        gone."""
        ...

    async def approval_for(self, ref: MessageRef) -> str | None:
        """The first approval recorded for ``ref`` (a group card's first member), or None."""
        ...

    async def shown_on(self, ref: MessageRef) -> list[str]:
        """Every approval recorded for ``ref``, sorted by id (one for a card, each member for a group card)."""
        ...


class Store(Protocol):
    """One backend's ports behind one object, sharing one connection."""

    @property
    def approvals(self) -> ApprovalStore:
        """Approvals: create, decide (one atomic step), page, wait for changes."""
        ...

    @property
    def ledger(self) -> ExecutionLedger:
        """The execution ledger: one claim per effect, fenced by its lease."""
        ...

    @property
    def runs(self) -> RunStore:
        """Run checkpoints and run ownership."""
        ...

    @property
    def journal(self) -> Journal:
        """A run's step boundaries, each one atomic operation."""
        ...

    @property
    def jobs(self) -> JobQueue:
        """Durable jobs: resumes, card updates, webhook deliveries."""
        ...

    @property
    def trust(self) -> TrustStore:
        """Session trust grants."""
        ...

    @property
    def delegations(self) -> DelegationStore:
        """Delegations of reviewer roles."""
        ...

    @property
    def receipts(self) -> ReceiptLedger:
        """The receipts issued and their use."""
        ...

    @property
    def halts(self) -> HaltOrders:
        """The stop switch's orders."""
        ...

    @property
    def alerts(self) -> AlertStates:
        """Each alert's state."""
        ...

    @property
    def holds(self) -> CallHolds:
        """Holds an outside service put on a kind of call (shared by every replica)."""
        ...

    @property
    def windows(self) -> RateWindows:
        """Rolling windows for velocity and rolling-sum rules."""
        ...

    @property
    def audit(self) -> AuditLog:
        """The hash-chained audit trail."""
        ...

    @property
    def messages(self) -> MessageMap:
        """Where each approval's card was posted."""
        ...

    @property
    def tallies(self) -> Tallies:
        """Hourly counts for the oversight measures."""
        ...

    @property
    def purger(self) -> Purger:
        """Retention: what the horizons no longer keep, removed with an anchored audit entry."""
        ...

    async def ping(self) -> None:
        """Raise :class:`~hitl.engine.errors.StoreError` unless the backend answers (health checks)."""
        ...

    async def migrate(self) -> list[int]:
        """Bring the store's schema up to this version of hitl (every store does so as it opens; ``hitl migrate``
        does it ahead of a deploy): the schema versions applied now, none when it was up to date."""
        ...

    async def close(self) -> None:
        """Release the store's connections."""
        ...


class Notifier(Protocol):
    """Tells reviewers about approvals. The Slack bot implements it; the CLI uses none."""

    async def approval_requested(self, approval: Approval) -> None: ...

    @property
    def decision_jobs(self) -> tuple[str, ...]:
        """Kinds of durable job the store queues with every recorded decision, in the decision's own atomic step
        (payload ``{"approval_id": ...}``): the Slack card update. Empty when the notifier needs none."""
        ...

    async def approval_changed(self, approval: Approval, *, queued: bool = False) -> None:
        """``approval`` changed. ``queued``: its :attr:`decision_jobs` are already in the store (a decision)."""
        ...

    async def action_notified(self, *, tool: str, args: dict[str, Any], session_id: str, reason: str) -> None:
        """A call ran with an FYI to reviewers. Its ``fyi`` job (payload: these fields) was queued by the service
        with the call's audit entry, before the call went ahead: the Slack notifier posts the queued jobs."""
        ...


class RunReporter(Protocol):
    """Tells people how a run went on after a decision (the bot posts in the card's thread)."""

    async def run_continued(self, approval: Approval, result: RunResult) -> None:
        """The run waiting on ``approval`` was resumed and now stands at ``result``."""
        ...

    async def run_blocked(self, approval: Approval, message: str) -> None:
        """The run waiting on ``approval`` could not continue; ``message`` says why and what to do."""
        ...
