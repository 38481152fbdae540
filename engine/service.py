"""ApprovalService: load -> domain -> save -> tell. The one path every channel proposes and decides through.

Slack buttons, slash commands, modals, the CLI and the HTTP API all call :meth:`ApprovalService.decide`,
so authorization (roles, separation of duties, quorum), binding (version + hash + expiry) and auditing
are the same everywhere. What may refuse or change what is admitted is an admission guard
(:mod:`.admission.guards`), run in a declared order; what only observes (metrics, spot checks, practice twins,
rolling windows, the notifier, webhooks) is a fact subscriber (:mod:`.subscribers.facts`, :mod:`.subscribers`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from hitl.engine.admission.caps import within_caps
from hitl.engine.admission.guards import (
    DECISION_GUARDS,
    PROPOSAL_GUARDS,
    Admission,
    DecisionAttempt,
    DecisionGuard,
    Order,
    ProposalGuard,
    admission_order,
)
from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.consequences.callables import ConsequenceFn
from hitl.engine.consequences.computing import with_consequence
from hitl.engine.consequences.running import ConsequenceRunner
from hitl.engine.consequences.threads import ThreadConsequences
from hitl.engine.deciding.checks import ArgsValidator, checked_edit
from hitl.engine.deciding.edit_consequences import edit_consequence
from hitl.engine.deciding.first_interaction import count_first_interaction
from hitl.engine.deciding.groups import decide_group
from hitl.engine.delegation.delegates import DelegateRule
from hitl.engine.delegation.delegations import DelegatedReviewers, Delegations
from hitl.engine.domain.actions import (
    TRUST_TTL,
    WINDOWS,
    ProposedAction,
    clean_args,
    not_reserved,
    plain_args,
    window_events,
)
from hitl.engine.domain.arg_schema import compile_schema
from hitl.engine.domain.confirmation import APPROVING
from hitl.engine.domain.decide import RESUME_JOB, DecideCommand
from hitl.engine.domain.drafts import ApprovalDrafts
from hitl.engine.domain.edits import changes, changes_text
from hitl.engine.domain.frozen import quick_init
from hitl.engine.domain.group_outcome import GroupOutcome
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Reviewer, Status, Tier
from hitl.engine.domain.own_confirmation import settled
from hitl.engine.domain.policy import Policy, Verdict
from hitl.engine.domain.practice import PracticeSpec
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.questions import ASK_PERSON
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.redaction import Redactor
from hitl.engine.domain.requests import DecideRequest, GroupDecideRequest, ProposeRequest
from hitl.engine.domain.reviewers import ConfiguredReviewers
from hitl.engine.domain.spot_checks import SpotCheckSpec
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput, NotFound, PolicyError, StaleVersion
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.policy_engines import OpaClient, engines_for
from hitl.engine.policy_engines.ports import PolicyEngine
from hitl.engine.ports import Clock, Notifier, ReviewerDirectory, Store, Workspace
from hitl.engine.proposing.allowed_calls import AllowedPlans, declared_schema, record_told
from hitl.engine.proposing.verdicts import counted_verdict, explained
from hitl.engine.receipts.claiming import receipt_claims_for
from hitl.engine.receipts.ports import ReceiptClaims, ReceiptSigner, ReceiptsRemote
from hitl.engine.subscribers import SUBSCRIBERS
from hitl.engine.subscribers.events import EventSink, Outbox
from hitl.engine.subscribers.facts import (
    Allowed,
    Cancelled,
    Decided,
    Expired,
    Fact,
    FactSubscriber,
    Proposed,
    Route,
    routes,
)
from hitl.engine.subscribers.windows import count_windows, forget_windows

log = logging.getLogger(__name__)

__all__ = ["TRUST_TTL", "WINDOWS", "AnswerWindow", "ApprovalService", "ArgsValidator", "Proposal"]

_BOUND_ALONE = frozenset({DecisionKind.APPROVE, DecisionKind.TRUST})
"""Decisions with nothing to check before the store's atomic step: bound to a version and hash, they need no read."""


@dataclass(frozen=True)
class AnswerWindow:
    """The time a surface has before it must answer the person who decided (Slack: 3 s), and how it learns the
    moment the decision is durably recorded.

    ``by`` is a wall-clock instant (seconds since the epoch): the store refuses the decision if its atomic step
    runs later (``too_late``), so a surface that stopped waiting and said "not recorded" is never contradicted by
    a decision landing afterwards. ``recorded`` resolves with the approval as soon as the store's step committed,
    before the follow-up work (trust grant, metrics, resume job) that the surface need not wait for.
    """

    by: float
    recorded: asyncio.Future[Approval] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def mark(self, approval: Approval) -> None:
        """The decision is recorded: release whoever waits to answer."""
        if not self.recorded.done():
            self.recorded.set_result(approval)


@quick_init
@dataclass(frozen=True)
class Proposal:
    """What the policy made of a proposed action."""

    verdict: Verdict
    approval: Approval | None
    """The pending (or earlier) approval when a human is needed; None when the action may run now."""
    created: bool = False
    args: dict[str, Any] = field(default_factory=dict)
    """The normalised arguments the policy judged (what runs when no approval is needed)."""
    scope: str = ""
    """For a call that may run now: what names it where it was counted (its receipt's scope, so the receipt is
    issued for the call that was counted, once)."""

    @property
    def may_run(self) -> bool:
        """Whether the action may run now: no person is needed and the policy does not deny it."""
        return self.approval is None and not self.verdict.denied


@dataclass
class ApprovalService:
    """Policy, reviewers and store wired together.

    Args:
        store: where approvals live.
        policy: the compiled policy.
        reviewers: who a reviewer named by id is (``hitl.yaml``'s roles); a surface that resolved the person
            itself (Slack user groups, an API token) passes the :class:`Reviewer` in the request.
        clock: the time source.
        notifier: tells reviewers (Slack); optional.
        requester: default identity of whoever proposes actions.
        redactor: what untrusted evidence loses before it is stored.
        evidence_limit: the characters of evidence kept.
        validate_args: schema check for modified arguments; optional.
        events: queues events for webhook subscribers; optional.
        spot_check: which autonomous actions are put to reviewers after the fact (``oversight.spot_check``).
        practice: which approvals get a practice twin with a planted defect (``oversight.practice``).
        proposal_guards: what every proposal meets, in order, before anything is counted or stored.
        decision_guards: what every decision meets, in order, before the store's atomic step.
        subscribers: who observes each fact, in order.
    """

    store: Store
    policy: Policy
    reviewers: ReviewerDirectory
    clock: Clock
    notifier: Notifier | None = None
    requester: str = "agent"
    redactor: Redactor = field(default_factory=Redactor)
    evidence_limit: int = 2000
    validate_args: ArgsValidator | None = None
    events: EventSink | None = None
    spot_check: SpotCheckSpec = field(default_factory=SpotCheckSpec)
    practice: PracticeSpec = field(default_factory=PracticeSpec)
    proposal_guards: Sequence[ProposalGuard] = PROPOSAL_GUARDS
    decision_guards: Sequence[DecisionGuard] = DECISION_GUARDS
    subscribers: Sequence[FactSubscriber] = SUBSCRIBERS
    receipts: ReceiptClaims | None = None
    """``receipts:`` of ``hitl.yaml``: how an approved action's execution is claimed with its receipt (``hitl
    serve`` signs; every other process asks it); None when none are asked for."""
    consequences: ConsequenceRunner = field(default_factory=ThreadConsequences)
    """Runs tools' consequences (``hitl serve``: in worker processes; elsewhere in threads of this process)."""
    delegates: DelegateRule = field(default_factory=DelegateRule)
    """Who a delegation may be handed to (every surface gives through :meth:`Delegations.give` with it); the
    default, no one."""
    engines: Mapping[str, PolicyEngine] = field(default_factory=dict)
    """The policy engines of ``source:`` rules, by rule name; a source rule without one asks a person."""
    switch: StopSwitch = field(init=False)
    """The stop switch: no proposal, approval or execution of a halted tool goes through."""
    delegations: Delegations = field(init=False)
    """The store's delegations of reviewer roles (what :class:`DelegatedReviewers` adds to a reviewer)."""
    _allowed: AllowedPlans = field(init=False, default_factory=AllowedPlans, repr=False)
    given_consequences: dict[str, ConsequenceFn] = field(init=False, default_factory=dict, repr=False)
    """The consequences given beside tools in Python in this process, by tool: an edit's and a twin's use them."""
    _routes: tuple[Sequence[FactSubscriber], dict[type, Route]] | None = field(init=False, default=None, repr=False)
    _order: tuple[Sequence[ProposalGuard], Order] | None = field(init=False, default=None, repr=False)
    remote_receipts: ClassVar[ReceiptsRemote | None] = None
    """How :meth:`from_config` reaches ``hitl serve`` for receipts when no ``remote`` is given: an HTTP client, so
    never the engine's; ``hitl.ApprovalService``, the public door's, has one. None: such a process claims nothing."""

    opa_client: ClassVar[OpaClient | None] = None
    """What :meth:`from_config` asks OPA with when no ``opa`` is given: an HTTP client, so never the engine's;
    ``hitl.ApprovalService``, the public door's, has one."""
    local_notifier: ClassVar[Callable[[Store, Clock], Notifier] | None] = None
    """What :meth:`from_config` tells reviewers through when no ``notifier`` is given: ``hitl.ApprovalService``'s
    (an agent's process, without Slack) queues its card updates for ``hitl serve``. None: nobody is told from here."""

    def __post_init__(self) -> None:
        self.switch = StopSwitch.shared(self.store, self.clock)
        self.delegations = Delegations.shared(self.store, self.clock)

    @classmethod
    def from_config(
        cls,
        config: HitlConfig,
        *,
        store: Store,
        clock: Clock,
        notifier: Notifier | None = None,
        validate_args: ArgsValidator | None = None,
        signer: ReceiptSigner | None = None,
        environ: Mapping[str, str] | None = None,
        config_path: str | None = None,
        workspace: Workspace | None = None,
        remote: ReceiptsRemote | None = None,
        consequences: ConsequenceRunner | None = None,
        opa: OpaClient | None = None,
    ) -> Self:
        """The service ``hitl.yaml`` describes (policy, reviewers, redaction, webhooks), on ``store`` and ``clock``.
        With ``receipts:`` configured, ``signer`` (``hitl serve``'s key) issues the receipts; any other process
        claims through ``hitl serve`` (``HITL_API_URL`` and ``HITL_TOKEN`` in ``environ``, the process's environment
        unless given), and under ``production: true`` does not start if it could read the key itself
        (``config_path``: where a relative ``key_file`` is read from). ``workspace``: where a delegate that
        ``hitl.yaml`` does not list is looked up (``hitl serve``'s Slack). ``remote``: how this process reaches
        ``hitl serve`` (the composition root's client; :attr:`remote_receipts` unless given). ``consequences``:
        what runs tools' consequences (default: threads of this process). ``opa``: what asks OPA for ``opa:``
        source rules (:attr:`opa_client` unless given; none: such rules ask a person)."""
        receipts = None
        if config.receipts is not None:
            receipts = receipt_claims_for(
                config.receipts,
                store=store,
                clock=clock,
                signer=signer,
                production=config.production,
                environ=os.environ if environ is None else environ,
                base=Path(config_path).resolve().parent if config_path else None,
                remote=remote if remote is not None else cls.remote_receipts,
            )
        return cls(
            store=store,
            policy=config.build_policy(),
            reviewers=DelegatedReviewers(ConfiguredReviewers(config.build_roles()), Delegations.shared(store, clock)),
            clock=clock,
            notifier=notifier or (cls.local_notifier(store, clock) if cls.local_notifier is not None else None),
            requester=config.requester,
            redactor=config.build_redactor(),
            evidence_limit=config.redaction.evidence_limit,
            validate_args=validate_args,
            events=Outbox(store, clock, config.api.webhooks, view_of=config.present) if config.api.webhooks else None,
            spot_check=config.oversight.spot_check,
            practice=config.oversight.practice,
            receipts=receipts,
            delegates=DelegateRule.from_config(config, workspace=workspace),
            consequences=consequences or ThreadConsequences(),
            engines=engines_for(
                config.policy,
                Path(config_path).resolve().parent if config_path else None,
                opa=opa if opa is not None else cls.opa_client,
            ),
        )

    @property
    def drafts(self) -> ApprovalDrafts:
        """Builds the approvals this service makes, with its policy's wording and its redaction."""
        return ApprovalDrafts(self.policy, self.redactor, self.evidence_limit)

    async def publish(self, fact: Fact) -> None:
        """Tell every subscriber that observes ``fact`` (:mod:`hitl.engine.subscribers.facts`); none can undo what was
        recorded."""
        routed = self._routes
        if routed is None or routed[0] is not self.subscribers:  # worked out again when the list is replaced
            routed = self._routes = (self.subscribers, routes(self.subscribers))
        for subscriber, wants in routed[1][type(fact)]:  # in order; one that fails is logged, the rest hear it
            try:
                if wants is None or wants(fact, self):
                    await subscriber.observe(fact, self)
            except Exception:  # an observer never undoes or blocks what was recorded
                log.exception(
                    "%s failed on %s; what was recorded stands", type(subscriber).__name__, type(fact).__name__
                )

    async def announce(self, approval: Approval) -> None:
        """Tell reviewers and subscribers about a new approval (after it was stored)."""
        await self.publish(Proposed(approval))

    # -- proposing ----------------------------------------------------------------------------------------
    async def explain(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        session_id: str = "",
        requester: str | None = None,
        min_tier: Tier = Tier.AUTO,
        instead_of: Approval | None = None,
    ) -> Verdict:
        """The verdict for an action without recording anything (``hitl policy explain``). ``requester``: whose
        trust grants in the session count (default: the service's requester). ``instead_of``: the approval these
        arguments would replace (an edit): its own window events do not count against them."""
        return await explained(
            self.store,
            self.policy,
            tool,
            args,
            session_id=session_id,
            requester=requester or self.requester,
            min_tier=min_tier,
            instead_of=instead_of,
            now=self.clock.now(),
            engines=self.engines,
        )

    async def propose(self, request: ProposeRequest) -> Proposal:
        """Evaluate the policy on a proposed call; create (or re-attach to) an approval when a person is needed.

        What each field of the request does is told on :class:`ProposeRequest`. Asking again for the same action
        in the same session returns the same approval. A call is counted toward velocity and rolling-sum rules once
        per call: a named call asked again is judged as it was first judged and counted once (its first asking's
        FYI and audit stand for both); an unnamed one is counted each time it is asked.
        Every call meets the same admission guards, in order; a call its tool's name alone lets run then skips
        only the policy's evaluation (nothing else could change its verdict).
        """
        now = self.clock.now()
        tool, batch = request.tool, request.batch
        plannable = batch is None and request.min_tier is Tier.AUTO
        plan = self._allowed.plan(tool, self.policy, self.spot_check) if plannable else None
        if plan is not None:
            items = [plain_args(tool, request.args)]  # the name was checked when the plan was made
        else:
            if request.kind is ApprovalKind.ACTION:
                not_reserved(tool)
            items = [clean_args(tool, a) for a in batch] if batch is not None else [clean_args(tool, request.args)]
        # Checked and compiled once here; the guards and the approval use the same compiled schema.
        compiled = compile_schema(tool, request.schema) if request.schema is not None else None
        declared = plan.declared if plan is not None else declared_schema(self.policy, tool)
        requester = request.requester or self.requester
        admission = Admission(request, items, compiled, declared, requester, now)
        order = self._order
        if order is None or order[0] is not self.proposal_guards:  # worked out again when the list is replaced
            order = self._order = (self.proposal_guards, admission_order(self.proposal_guards))
        for guard, passes in order[1]:
            if passes is None or not passes(admission, self):
                await guard.admit(admission, self)
        action = ProposedAction(request, items, {"items": items} if batch is not None else items[0], requester)
        if plan is not None:
            await self.publish(Allowed(request, plan.verdict, action, now))
            return Proposal(verdict=plan.verdict, approval=None, args=action.clean, scope=action.scope)
        verdict, counted, again = await counted_verdict(self.store, self.policy, request, action, now, self.engines)
        verdict = settled(verdict, request.on_behalf_of, quorum=self.policy.tool_spec(tool).quorum)
        if verdict.denied:
            await forget_windows(self.store, counted)
            return Proposal(verdict=verdict, approval=None, args=action.clean)
        if not verdict.tier.needs_human:
            if not again:  # the same named call's first asking was audited, told and observed: not twice
                await record_told(self.store, request, verdict, action, now)  # before it runs: if not, it does not
                await self.publish(Allowed(request, verdict, action, now))
            return Proposal(verdict=verdict, approval=None, args=action.clean, scope=action.scope)
        schema = request.schema if compiled is not None else None
        approval = self.drafts.approval(request, verdict, action, schema=schema, counted=counted, now=now)
        if not request.create:
            return Proposal(verdict=verdict, approval=approval, args=action.clean)
        if self.policy.spec.caps.on:
            await within_caps(self.store, self.policy.spec.caps, approval, counted=counted, now=now)
        if request.consequence is not None:
            self.given_consequences[tool] = request.consequence
        approval = await self.consequence_of(approval, given=request.consequence)
        stored, created = await self.store.approvals.create(approval)
        if created:
            await self.announce(stored)
        else:  # asked again: the approval's own events count for it; an unnamed call's new ones are taken back
            held = set(window_events(stored))
            await forget_windows(self.store, [e for e in counted if (e[0], e[1]) not in held])
        return Proposal(verdict=verdict, approval=stored, created=created, args=action.clean)

    # -- deciding -----------------------------------------------------------------------------------------
    async def consequence_of(
        self, approval: Approval, *, given: ConsequenceFn | None = None, within: float | None = None
    ) -> Approval:
        """``approval`` (not stored yet, and asking a person) with its tool's consequence computed, audited first
        (:mod:`~hitl.engine.consequences.computing`): :meth:`propose` calls it, and a run before it pauses on one.
        ``within``: seconds it may take at most, when less than its tool's bound (a surface must answer)."""
        given = given or self.given_consequences.get(approval.tool)
        approval, computed = await with_consequence(
            self.consequences, self.policy, self.redactor, approval, given=given, now=self.clock.now(), within=within
        )
        if computed is not None:  # it ran, whether or not this asking creates the approval: audited before either
            await self.store.audit.append(computed.audit)
            await self.store.tallies.add(computed.counts, now=computed.audit.at)  # its time, in hitl stats
        return approval

    async def decide(
        self,
        request: DecideRequest,
        *,
        window: AnswerWindow | None = None,
        resume: bool = True,
        current: Approval | None = None,
    ) -> Approval:
        """Record one decision through the store's atomic step; returns the approval after it.

        ``expected_version``/``expected_hash`` bind the decision to what the reviewer saw (a Slack card carries
        both); a caller that names only the id binds to the current version. A reviewer given by id gets the roles
        the configuration names. Every refusal is audited: the store audits the ones its atomic step makes; the
        guards and the checks before it audit theirs (a halted tool, a missing reason, invalid edited arguments,
        feedback on an action).

        ``window``: the deadline of a surface that must answer in time, and its signal that the decision is
        recorded. ``resume``: a decision that leaves a workflow run's approval decided queues the run's resume in
        the same atomic step (False: the caller continues the run itself, right after). ``current``: the approval
        as the caller read it (not read again; the store's atomic step still checks its version and hash).
        """
        reviewer = request.reviewer
        if not isinstance(reviewer, Reviewer):
            reviewer = await self.reviewers.reviewer(reviewer)
        attempt = DecisionAttempt(request, reviewer, current, self.store)
        for guard in self.decision_guards:
            await guard.admit(attempt, self)
        request = attempt.request
        seen = await self._seen(attempt) if request.view_digest is not None else None
        bound = request.expected_version is not None and request.expected_hash is not None
        # Approve and Trust bound to what the person saw have nothing to check first: one atomic step, no read.
        # (Not when it carries typed values or a reason to check: what approving takes is checked on what it reads.)
        alone = bound and request.kind in _BOUND_ALONE and request.confirm is None and request.reason is None
        alone = alone and ASK_PERSON not in self.policy.spec.tools  # a question is never approved as it is
        read = None if alone else await attempt.current()
        new_args, replacement = await self._checked(read, request, reviewer) if read is not None else (None, None)
        by = window.by if window is not None else None
        edited = await edit_consequence(self, read, new_args, replacement, answer_by=by) if read and new_args else None
        if replacement is not None and edited is not None:  # asked anew: of what it asks, like a fresh proposal
            replacement = edited
        cmd = DecideCommand(
            approval_id=request.approval_id,
            reviewer=reviewer,
            kind=request.kind,
            expected_version=_given(request.expected_version, read, "version"),
            expected_hash=_given(request.expected_hash, read, "action_hash"),
            reason=request.reason,
            args=new_args,
            supersede_with=replacement.id if replacement else None,
            consequence=edited.consequence if edited is not None and replacement is None else None,
            via=request.via,
            attended=read is not None and request.kind in APPROVING,
            jobs=self._decision_jobs(),
            run_jobs=(RESUME_JOB,) if resume else (),
            note=changes_text(changes(read.execute_args, new_args)) if read is not None and new_args else "",
            answer_by=window.by if window is not None else None,
            trust_until=self.clock.now() + self.policy.spec.trust_ttl if request.kind is DecisionKind.TRUST else None,
            view=seen,
        )
        updated = await self._record(cmd, replacement)
        if window is not None:
            window.mark(updated)
        if replacement is not None:
            await self.announce(await self.store.approvals.get(replacement.id))
        await self.publish(Decided(updated, request.kind))
        return updated

    async def decide_group(self, request: GroupDecideRequest) -> GroupOutcome:
        """Record one decision on several approvals, each member through :meth:`decide` (:mod:`..group_decisions`)."""
        one = lambda member, a: self.decide(member, current=a)  # noqa: E731  # one member, as read
        return await decide_group(request, read=self.store.approvals.get, decide=one, refused=self.record_refusal)

    def present(self, a: Approval) -> Presentation:
        """The one view of ``a`` (:mod:`~hitl.engine.domain.presentation`), in this service's policy's words: its
        summary sentences and the labels of its declared schemas. Every surface draws this, and a decision that
        names a view by its digest is checked against it."""
        return self.policy.spec.present(a)

    async def _seen(self, attempt: DecisionAttempt) -> dict[str, Any] | None:
        """The view a decision names by its digest, canonical, for its audit entry: the approval's current view, or
        the decision is refused as stale (audited), as a decision on an older version is. The store's atomic step
        still checks the version, so a change after this read is caught there.

        None when the atomic step is sure to refuse the decision on its own, with the more telling reason: the
        approval is no longer pending (already decided, expired) or the decision names another version."""
        request = attempt.request
        current = await attempt.current()
        canonical, digest = self.present(current).recorded()
        if digest == request.view_digest:
            return canonical
        named = request.expected_version
        if current.status is not Status.PENDING or (named is not None and named != current.version):
            return None
        detail = f"{request.kind} via {request.via} on a view that is not version {current.version}'s"
        await self.record_refusal(current.id, request.reviewer_id, ErrorCode.STALE_VERSION, detail)
        raise StaleVersion(
            f"approval {current.id} is not what the view decided on showed: it is at version {current.version} now, "
            "or shown differently; look at it again (the card is refreshed) and decide on what it shows"
        )

    def _decision_jobs(self) -> tuple[str, ...]:
        """The jobs a decision writes in its atomic step, one outbox: the card update, the events."""
        cards = self.notifier.decision_jobs if self.notifier is not None else ()
        return cards + (self.events.decision_jobs if self.events is not None else ())

    async def _record(self, cmd: DecideCommand, replacement: Approval | None) -> Approval:
        """The store's atomic step. A replacing approval is counted, then created before the original is
        superseded: a crash in between leaves an extra pending approval that nothing executes (runs follow
        ``superseded_by``), never a lost one; a refused decision cancels it."""
        if replacement is None:
            return await self.store.approvals.decide(cmd, now=self.clock.now())
        events = [[key, replacement.dedupe_key] for key in self.policy.window_keys(replacement.tool, replacement.args)]
        await count_windows(self.store, self.policy, replacement.tool, replacement.args, events, now=self.clock.now())
        if events:
            replacement = replacement.model_copy(update={"metadata": {**replacement.metadata, WINDOWS: events}})
        await self.store.approvals.create(replacement)
        try:
            return await self.store.approvals.decide(cmd, now=self.clock.now())
        except EngineError:
            await self.store.approvals.transition(
                replacement.id,
                target=Status.CANCELLED,
                expected_version=None,
                actor="system",
                now=self.clock.now(),
                reason="modification refused",
            )
            raise

    async def first_interaction(self, approval: Approval) -> bool:
        """Count the time to ``approval``'s first interaction (a button pressed, a view opened, ``/hitl show``), once
        across processes; True when this was the first (a click that decided it may be: then it is its decision too).
        """
        return await count_first_interaction(self.store, approval, self.clock.now())

    async def record_refusal(self, approval_id: str, actor: str, code: ErrorCode | str, detail: str) -> None:
        """Audit a refusal made outside the store's atomic step (a form that was altered, a stranger, ...)."""
        try:
            current: Approval | None = await self.store.approvals.get(approval_id)
        except NotFound:
            current = None
        await self.store.audit.append(
            AuditEntry(
                at=self.clock.now(),
                actor=actor[:200],
                event="refused",
                approval_id=current.id if current else None,
                version=current.version if current else None,
                action_hash=current.action_hash if current else None,
                outcome=str(code),
                detail=detail[:500],
            )
        )

    async def _checked(
        self, current: Approval, request: DecideRequest, reviewer: Reviewer
    ) -> tuple[dict[str, Any] | None, Approval | None]:
        """The checks a decision passes before the store's atomic step: the edited arguments (validated) and the
        replacing approval when the edit needs other approvers. A refusal here is audited."""
        try:
            return await checked_edit(self, current, request)
        except (InvalidInput, PolicyError) as exc:
            detail = f"{request.kind} via {request.via}: {exc.message}"
            await self.record_refusal(request.approval_id, reviewer.id, exc.code, detail)
            raise

    # -- closing ------------------------------------------------------------------------------------------
    async def cancel(
        self, approval_id: str, *, actor: str, reason: str, expected_version: int | None = None
    ) -> Approval:
        """Close a pending approval nobody will act on (audited; the card says so). With ``expected_version`` it
        loses to a decision made meanwhile (:class:`~hitl.engine.errors.StaleVersion`)."""
        updated = await self.store.approvals.transition(
            approval_id,
            target=Status.CANCELLED,
            expected_version=expected_version,
            actor=actor,
            now=self.clock.now(),
            reason=reason,
        )
        await self.publish(Cancelled(updated))
        return updated

    async def expire_due(self, *, limit: int = 100) -> list[Approval]:
        """Expire what is due; an expiry is recorded as expiry, never as a rejection."""
        expired = await self.store.approvals.expire_due(now=self.clock.now(), limit=limit)
        for a in expired:
            await self.publish(Expired(a))
        return expired


def _given(value: Any, read: Approval | None, name: str) -> Any:
    """What the caller bound the decision to, else the approval's current value (it named only the id)."""
    if value is not None:
        return value
    assert read is not None  # an unbound decision is always read first
    return getattr(read, name)
