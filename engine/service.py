"""ApprovalService: load -> domain -> save -> notify. The one path every channel decides through.

Slack buttons, slash commands, modals, the CLI and the HTTP API all call :meth:`ApprovalService.decide`,
so authorization (roles, separation of duties, quorum), binding (version + hash + expiry) and auditing
are the same everywhere.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hitl.engine.config.api import EventKind
from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.domain.arg_schema import CompiledSchema, compile_schema, validate_args
from hitl.engine.domain.decide import RESUME_JOB, DecideCommand
from hitl.engine.domain.edits import CHANGED, changes, changes_text, merge_patch
from hitl.engine.domain.halts import acted_on, covering
from hitl.engine.domain.hashing import action_hash, batch_hash, normalize
from hitl.engine.domain.ids import approval_id, dedupe_key, new_session_id
from hitl.engine.domain.models import RESERVED_PREFIXES, Approval, ApprovalKind, DecisionKind, Reviewer, Status, Tier
from hitl.engine.domain.policy import Policy, PolicyContext, Verdict, WindowStats
from hitl.engine.domain.practice import POST_AFTER, SeededSpec, caught, defect_for, is_practice, post_after, seeded
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.redaction import Redactor, bounded
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.reviewers import ConfiguredReviewers
from hitl.engine.domain.sampling import sampled
from hitl.engine.domain.spot_checks import SPOT, SPOT_CHECK, SpotCheckSpec, checked_tool, is_spot_check
from hitl.engine.domain.summary import render_summary
from hitl.engine.domain.tally import Outcome, counts_for
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput, NotFound, PolicyError
from hitl.engine.events import FYI_JOB, EventSink, Outbox, approval_data, approval_event
from hitl.engine.ports import Clock, Notifier, ReviewerDirectory, Store
from hitl.engine.stop_switch import StopSwitch, halted

__all__ = ["TRUST_TTL", "AnswerWindow", "ApprovalService", "ArgsValidator", "Proposal"]

log = logging.getLogger(__name__)

ArgsValidator = Callable[[str, dict[str, Any]], dict[str, Any]]
"""Validates edited arguments for a tool and returns them normalised, or raises InvalidInput."""


_OUTCOMES = {
    DecisionKind.APPROVE: Outcome.APPROVED,
    DecisionKind.TRUST: Outcome.APPROVED,
    DecisionKind.MODIFY: Outcome.MODIFIED,
    DecisionKind.REJECT: Outcome.REJECTED,
    DecisionKind.FEEDBACK: Outcome.REJECTED,
}
"""What a final decision counts as in the metrics (feedback sends work back: a correction)."""

WINDOWS = "windows"
"""Approval metadata: the window events (key, event id) its proposal added, for velocity and rolling-sum rules."""
_NEVER_RAN = frozenset({Status.REJECTED, Status.SUPERSEDED, Status.EXPIRED, Status.CANCELLED})
_GOING_ON = frozenset({DecisionKind.APPROVE, DecisionKind.MODIFY, DecisionKind.TRUST})
"""Decisions that let an action run: refused while the stop switch covers its tool (rejecting still works)."""


_ANSWERED_BY_FEEDBACK = frozenset({ApprovalKind.GATE, ApprovalKind.REVIEW, ApprovalKind.DOUBT})
"""What feedback answers: a review (the step before runs again with it) or an effect in doubt ("Mark done")."""

TRUST_TTL = "trust_ttl"
"""Approval metadata: the seconds a Trust of this approval would trust its tool for, in its session."""


@dataclass(frozen=True)
class _Allowed:
    """What a call of one tool that its name alone lets run needs, worked out once per policy: the verdict, and
    ``hitl.yaml``'s schema for the tool compiled (the call's arguments are still checked against it, and against the
    schema the caller sends, on every call)."""

    verdict: Verdict
    declared: CompiledSchema | None


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


@dataclass(frozen=True)
class Proposal:
    """What the policy made of a proposed action."""

    verdict: Verdict
    approval: Approval | None
    """The pending (or earlier) approval when a human is needed; None when the action may run now."""
    created: bool = False
    args: dict[str, Any] = field(default_factory=dict)
    """The normalised arguments the policy judged (what runs when no approval is needed)."""

    @property
    def may_run(self) -> bool:
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
        events: queues events for webhook subscribers; optional.
        requester: default identity of whoever proposes actions.
        validate_args: schema check for modified arguments; optional.
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
    """Where approval events go (the webhook outbox, when ``api.webhooks`` lists subscribers)."""
    spot_check: SpotCheckSpec = field(default_factory=SpotCheckSpec)
    """Which autonomous actions are put to reviewers after the fact (``oversight.spot_check``)."""
    seeded: SeededSpec = field(default_factory=SeededSpec)
    """Which approvals get a practice twin with a planted defect (``oversight.seeded``)."""
    switch: StopSwitch = field(init=False)
    """The stop switch: no proposal, approval or execution of a halted tool goes through."""
    _allowed: dict[str, _Allowed | None] = field(init=False, default_factory=dict, repr=False)
    _allowed_for: tuple[Policy, SpotCheckSpec] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        self.switch = StopSwitch.shared(self.store, self.clock)

    @classmethod
    def from_config(
        cls,
        config: HitlConfig,
        *,
        store: Store,
        clock: Clock,
        notifier: Notifier | None = None,
        validate_args: ArgsValidator | None = None,
    ) -> ApprovalService:
        """The service ``hitl.yaml`` describes (policy, reviewers, redaction, webhooks), on ``store`` and ``clock``."""
        return cls(
            store=store,
            policy=config.build_policy(),
            reviewers=ConfiguredReviewers(config.build_roles()),
            clock=clock,
            notifier=notifier,
            requester=config.requester,
            redactor=config.build_redactor(),
            evidence_limit=config.redaction.evidence_limit,
            validate_args=validate_args,
            events=Outbox(store, clock, config.api.webhooks) if config.api.webhooks else None,
            spot_check=config.oversight.spot_check,
            seeded=config.oversight.seeded,
        )

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
        now = self.clock.now()
        clean = _clean_args(tool, args)
        own = dict(_window_events(instead_of)) if instead_of is not None else {}
        windows = {
            k: await self.store.windows.stats(k, now=now, window=w, exclude=own.get(k, ""))
            for k, (w, _) in self.policy.window_keys(tool, clean).items()
        }
        trusted = await self._trusted(session_id, requester or self.requester, now)
        return self.policy.evaluate(
            tool, clean, PolicyContext(now=now, trusted_tools=trusted, windows=windows, min_tier=min_tier)
        )

    async def propose(self, request: ProposeRequest) -> Proposal:
        """Evaluate the policy on a proposed call; create (or re-attach to) an approval when a person is needed.

        What each field of the request does is told on :class:`ProposeRequest`. Asking again for the same action
        in the same session returns the same approval, and counts once toward velocity and rolling-sum rules.
        """
        now = self.clock.now()
        tool, batch = request.tool, request.batch
        if batch is None and request.min_tier is Tier.AUTO:
            allowed = self._allowed_plan(tool)
            if allowed is not None:
                return await self._propose_allowed(request, allowed, now)
        if request.kind is ApprovalKind.ACTION:
            _not_reserved(tool)
        items = [_clean_args(tool, a) for a in batch] if batch is not None else [_clean_args(tool, request.args)]
        clean = {"items": items} if batch is not None else items[0]
        # Checked and compiled once here; admitting the call's arguments uses the same compiled schema.
        compiled = compile_schema(tool, request.schema) if request.schema is not None else None
        schema = request.schema if compiled is not None else None
        await self._admit(
            tool,
            items,
            compiled,
            session_id=request.session_id,
            requester=request.requester,
            now=now,
            declared=self._declared_schema(tool),
        )
        await self._not_halted(request, items, now)
        action = _Action(request, items, clean, request.requester or self.requester)
        verdict, counted = await self._verdict(request, action, now)
        if verdict.denied:
            for key, event in counted:
                await self._safe(self.store.windows.forget(key, event_id=event))
            return Proposal(verdict=verdict, approval=None, args=clean)
        if not verdict.tier.needs_human:
            await self._without_a_person(request, verdict, action, now)
            return Proposal(verdict=verdict, approval=None, args=clean)
        approval = self._approval_for(request, verdict, action, schema, counted, now)
        if not request.create:
            return Proposal(verdict=verdict, approval=approval, args=clean)
        stored, created = await self.store.approvals.create(approval)
        if created:
            await self.announce(stored)
        return Proposal(verdict=verdict, approval=stored, created=created, args=clean)

    def _allowed_plan(self, tool: str) -> _Allowed | None:
        """The plan for ``tool`` when its name alone lets it run with nothing recorded: the policy decides it by name
        (no rule, trust grant or step can change it), as ``auto``, and no spot check samples it. None otherwise,
        and then the full path decides. Worked out once per tool while the policy and the spot checks stay the
        same objects."""
        policy, spot_check = self.policy, self.spot_check
        made_for = self._allowed_for
        if made_for is None or made_for[0] is not policy or made_for[1] is not spot_check:
            self._allowed, self._allowed_for = {}, (policy, spot_check)
        if tool in self._allowed:
            return self._allowed[tool]
        verdict = policy.static_verdict(tool)
        plan = None
        if (
            verdict is not None
            and not verdict.denied
            and verdict.tier is Tier.AUTO
            and not spot_check.rate_for(tool, str(verdict.tier))
            and _TOOL_NAME.match(tool)
            and not tool.startswith(RESERVED_PREFIXES)
        ):
            plan = _Allowed(verdict, self._declared_schema(tool))
        if len(self._allowed) < 1024:  # a caller inventing tool names cannot grow it without bound
            self._allowed[tool] = plan
        return plan

    async def _propose_allowed(self, request: ProposeRequest, allowed: _Allowed, now: float) -> Proposal:
        """:meth:`propose` for a call its tool's name lets run: the same checks in the same order (arguments
        against both schemas, the stop switch), the same count toward the metrics, and nothing else to decide."""
        tool = request.tool
        clean = _plain_args(tool, request.args)  # the name was checked when the plan was made
        compiled = compile_schema(tool, request.schema) if request.schema is not None else None
        declared = allowed.declared
        if (declared is not None and not declared.is_valid(clean)) or (
            compiled is not None and not compiled.is_valid(clean)
        ):  # refused: admission names every bad field, audits the refusal and raises
            await self._admit(
                tool,
                [clean],
                compiled,
                session_id=request.session_id,
                requester=request.requester,
                now=now,
                declared=declared,
            )
        await self._not_halted(request, [clean], now)
        await self._tally(tool, str(allowed.verdict.tier), Outcome.AUTONOMOUS, now=now)
        return Proposal(verdict=allowed.verdict, approval=None, args=clean)

    def _declared_schema(self, tool: str) -> CompiledSchema | None:
        """``hitl.yaml``'s argument schema for ``tool``, compiled (None when it declares none)."""
        declared = self.policy.spec.tools.get(tool)
        return compile_schema(tool, declared.schema_) if declared is not None and declared.schema_ is not None else None

    async def _verdict(self, request: ProposeRequest, action: _Action, now: float) -> tuple[Verdict, list[list[str]]]:
        """The policy's verdict on every item (a batch takes its strictest), and each window event the action
        added, ``[key, event id]``: forgotten if it ends without running (denied now, or rejected, superseded,
        expired, cancelled later)."""
        tool, batch = request.tool, request.batch
        trusted = request.trusted
        if not self.policy.trust_matters(tool):
            trusted = frozenset()
        elif trusted is None or tool in trusted:
            # Only the absence of a grant is taken on trust: a tool the caller names is checked again, so a revoked
            # grant never approves anything.
            trusted = await self._trusted(request.session_id, action.requester, now)
        static = self.policy.static_verdict(tool) if batch is None and request.min_tier is Tier.AUTO else None
        if static is not None:
            return static, []
        verdicts: list[Verdict] = []
        counted: list[list[str]] = []
        for i, item in enumerate(action.items):
            windows: dict[str, WindowStats] = {}
            for key, (window, amount) in self.policy.window_keys(tool, item).items():
                event = f"{action.dedupe}#{i}" if batch is not None else action.dedupe
                windows[key] = await self.store.windows.add(key, amount=amount, now=now, window=window, event_id=event)
                counted.append([key, event])
            ctx = PolicyContext(now=now, trusted_tools=trusted, windows=windows, min_tier=request.min_tier)
            verdicts.append(self.policy.evaluate(tool, item, ctx))
        if batch is None:
            return verdicts[0], counted
        return max(verdicts, key=lambda v: (v.denied, v.tier.rank, v.quorum)), counted

    async def _without_a_person(self, request: ProposeRequest, verdict: Verdict, action: _Action, now: float) -> None:
        """An auto or notify call: counted as autonomous. A notify call, and a call let through by a reviewer's
        Trust, is audited and told to reviewers (FYI): what a Trust lets through is seen, not only granted."""
        tool = request.tool
        await self._tally(tool, str(verdict.tier), Outcome.AUTONOMOUS, now=now)
        rate = self.spot_check.rate_for(tool, str(verdict.tier))
        if rate and request.batch is None and sampled(action.dedupe, rate):  # no hash unless spot checks are on
            await self._spot_check(request, verdict, action, now)
        trusted = verdict.rule == "trusted"
        if verdict.tier is not Tier.NOTIFY and not trusted:
            return
        reason = "; ".join(verdict.reasons)
        # Recorded before it runs, like any decision the policy makes for a person to see: if the store cannot take
        # the line, the call does not go ahead.
        await self.store.audit.append(
            AuditEntry(
                at=now,
                actor=action.requester[:200],
                event="trusted" if trusted else "notified",
                action_hash=action.digest,
                outcome=str(verdict.tier),
                detail=f"{request.session_id}: {tool} ran with an FYI to reviewers ({reason})"[:500],
            )
        )
        session_id, args = request.session_id, action.clean
        if self.notifier is not None:
            await self._safe(self.notifier.action_notified(tool=tool, args=args, session_id=session_id, reason=reason))
        else:  # no Slack in this process: `hitl serve` on the same store posts it
            fyi = {"tool": tool, "args": args, "session_id": session_id, "reason": reason}
            await self._safe(self.store.jobs.enqueue(FYI_JOB, fyi, now=now))

    async def _spot_check(self, request: ProposeRequest, verdict: Verdict, action: _Action, now: float) -> None:
        """Put an action that runs without a person to reviewers after the fact: an approval of its own that no
        caller waits on and nothing executes, answered Looks right or Flag."""
        tool = request.tool
        declared = self.policy.spec.tools.get(tool)
        key = f"{SPOT}{action.dedupe}"
        check = Approval(
            id=approval_id(key),
            session_id=request.session_id,
            dedupe_key=key,
            tool=f"{SPOT}{tool}",
            args=action.clean,
            action_hash=action_hash(f"{SPOT}{tool}", action.clean),
            tier=Tier.APPROVE,
            kind=ApprovalKind.SPOT_CHECK,
            rule=SPOT_CHECK,
            reasons=(f"spot check: {tool} ran without review ({verdict.tier}, rule {verdict.rule})",),
            why=(f"{tool} ran without review; a sample of such actions is checked after the fact. Did it look right?",),
            summary=self._summary(tool, action.clean),
            required_role=declared.role if declared is not None else None,
            requester=action.requester,
            created_at=now,
            expires_at=now + self.policy.spec.default_timeout,
            evidence=bounded(self.redactor.redact(request.evidence), self.evidence_limit),
            metadata={"tier": str(verdict.tier), "modifiable": False},
        )
        stored, created = await self.store.approvals.create(check)
        if created:
            await self.announce(stored)

    def _approval_for(
        self,
        request: ProposeRequest,
        verdict: Verdict,
        action: _Action,
        schema: dict[str, Any] | None,
        counted: list[list[str]],
        now: float,
    ) -> Approval:
        """The approval a person must give for the call (not stored yet)."""
        tool, batch = request.tool, request.batch
        declared = self.policy.spec.tools.get(tool)
        if schema is None:  # the asker gave none: hitl.yaml's declared schema for the tool, if any
            schema = declared.schema_ if declared is not None else None
        return Approval(
            id=approval_id(action.dedupe),
            session_id=request.session_id,
            dedupe_key=action.dedupe,
            tool=tool,
            args=action.clean,
            action_hash=action.digest,
            tier=verdict.tier,
            kind=request.kind,
            rule=verdict.rule,
            reasons=verdict.reasons,
            why=verdict.why,
            summary=self._summary(tool, action.clean) if batch is None else None,
            required_role=request.role or verdict.required_role,
            quorum=verdict.quorum,
            requester=action.requester,
            created_at=now,
            expires_at=now + (request.timeout or verdict.timeout),
            evidence=bounded(self.redactor.redact(request.evidence), self.evidence_limit),
            preview=bounded(self.redactor.redact(request.preview), self.evidence_limit),
            trustable=verdict.trustable and batch is None,
            reason_required=verdict.reason_required,
            metadata={
                **(request.metadata or {}),
                **({"batch": len(action.items)} if batch is not None else {}),
                **({WINDOWS: counted} if counted else {}),
                # What a Trust would grant, so the card can say it before anyone consents to it.
                **({TRUST_TTL: self.policy.spec.trust_ttl} if verdict.trustable and batch is None else {}),
            },
            args_schema=schema,
        )

    def _summary(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """The tool's ``summary:`` sentence for ``args`` (None without a template, or when it fails on them)."""
        declared = self.policy.spec.tools.get(tool)
        return render_summary(declared.summary, args) if declared is not None and declared.summary else None

    async def _not_halted(self, request: ProposeRequest, items: list[dict[str, Any]], now: float) -> None:
        """The stop switch: a halted tool's call is refused before anything is counted or stored, and audited."""
        order = await self.switch.covering(request.tool)
        if order is None:
            return
        refusal = halted(order, request.tool)
        await self.store.audit.append(
            AuditEntry(
                at=now,
                actor=(request.requester or self.requester)[:200],
                event="refused",
                action_hash=action_hash(request.tool, items[0]) if len(items) == 1 else None,
                outcome=str(ErrorCode.HALTED),
                detail=f"{request.session_id}: {request.tool}: {refusal.message}"[:500],
            )
        )
        raise refusal

    async def _admit(
        self,
        tool: str,
        items: list[dict[str, Any]],
        schema: CompiledSchema | None,
        *,
        session_id: str,
        requester: str | None,
        now: float,
        declared: CompiledSchema | None,
    ) -> None:
        """Nothing unchecked enters: every item must satisfy the tool's schema declared in ``hitl.yaml`` and the one
        sent with the call, before the policy counts it or an approval exists. A refusal names every bad field, is
        audited, and writes nothing else. ``declared``: ``hitl.yaml``'s schema for the tool, compiled."""
        for source, checked in (("hitl.yaml", declared), ("the call", schema)):
            if checked is None:
                continue
            for i, item in enumerate(items):
                try:
                    validate_args(tool, checked.schema, item, checked)
                except InvalidInput as exc:
                    where = f" (item {i + 1})" if len(items) > 1 else ""
                    detail = f"{session_id}: {tool}{where} refused by the schema of {source}: {exc.message}"
                    await self.store.audit.append(
                        AuditEntry(
                            at=now,
                            actor=(requester or self.requester)[:200],
                            event="refused",
                            action_hash=action_hash(tool, item),
                            outcome=str(ErrorCode.INVALID_INPUT),
                            detail=detail[:500],
                        )
                    )
                    raise InvalidInput(
                        f"{exc.message} (checked against the schema of {source}; nothing was proposed)",
                        tool=tool,
                        fields=exc.context.get("fields", {}),
                    ) from None

    async def _trusted(self, session_id: str, requester: str, now: float) -> frozenset[str]:
        """The tools trusted for ``requester`` in ``session_id``: another identity's grant in the same session, or
        the same identity's in another session, does not count."""
        if not session_id:
            return frozenset()
        grants = await self.store.trust.active(session_id, requester=requester, now=now)
        return frozenset(g.tool for g in grants)

    # -- deciding -----------------------------------------------------------------------------------------
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
        ones made before it (a missing reason, invalid edited arguments, feedback on an action) are audited here.

        ``window``: the deadline of a surface that must answer in time, and its signal that the decision is
        recorded. ``resume``: a decision that leaves a workflow run's approval decided queues the run's resume in
        the same atomic step (False: the caller continues the run itself, right after). ``current``: the approval
        as the caller read it (not read again; the store's atomic step still checks its version and hash).
        """
        reviewer = request.reviewer
        if not isinstance(reviewer, Reviewer):
            reviewer = await self.reviewers.reviewer(reviewer)
        jobs = self._decision_jobs
        run_jobs = (RESUME_JOB,) if resume else ()
        answer_by = window.by if window is not None else None
        kind, approval_id, via = request.kind, request.approval_id, request.via
        halts = await self.switch.orders() if kind in _GOING_ON else []  # a spot check is checked below
        if halts:
            # Halted tools are not approved (rejecting still works): read, then refuse before the store's step.
            if current is None or current.id != approval_id:
                current = await self.store.approvals.get(approval_id)
            order = None if is_spot_check(current) else covering(halts, acted_on(current))
            if order is not None:
                refusal = halted(order, current.tool)
                detail = f"{kind} via {via}: {refusal.message}"
                await self.record_refusal(approval_id, reviewer.id, ErrorCode.HALTED, detail)
                raise refusal
        if (
            not halts
            and request.expected_version is not None
            and request.expected_hash is not None
            and kind in (DecisionKind.APPROVE, DecisionKind.TRUST)
        ):
            # Fully bound and nothing to validate: one atomic store step, no read first.
            cmd = DecideCommand(
                approval_id=approval_id,
                reviewer=reviewer,
                kind=kind,
                expected_version=request.expected_version,
                expected_hash=request.expected_hash,
                via=via,
                jobs=jobs,
                run_jobs=run_jobs,
                answer_by=answer_by,
                trust_until=self._trust_until(kind),
            )
            recorded = await self.store.approvals.decide(cmd, now=self.clock.now())
            if window is not None:
                window.mark(recorded)
            return await self._after_decision(recorded, kind)
        if current is None or current.id != approval_id:
            current = await self.store.approvals.get(approval_id)
        if kind is DecisionKind.MODIFY and is_practice(current):
            # An edit of a practice approval caught its defect: recorded as a rejection, so no edited twin is made.
            request = replace(request, kind=DecisionKind.REJECT, args=None, reason=request.reason or "edited")
            kind = DecisionKind.REJECT
        try:
            new_args, replacement = await self._checked(current, request)
        except (InvalidInput, PolicyError) as exc:
            await self.record_refusal(approval_id, reviewer.id, exc.code, f"{kind} via {via}: {exc.message}")
            raise
        cmd = DecideCommand(
            approval_id=approval_id,
            reviewer=reviewer,
            kind=kind,
            expected_version=current.version if request.expected_version is None else request.expected_version,
            expected_hash=current.action_hash if request.expected_hash is None else request.expected_hash,
            reason=request.reason,
            args=new_args,
            supersede_with=replacement.id if replacement else None,
            via=via,
            jobs=jobs,
            run_jobs=run_jobs,
            note=changes_text(changes(current.execute_args, new_args)) if new_args is not None else "",
            answer_by=answer_by,
            trust_until=self._trust_until(kind),
        )
        if replacement is not None:
            # Counted, then created before the original is superseded: a crash in between leaves an extra pending
            # approval that nothing executes (runs follow ``superseded_by``), never a lost one.
            replacement = await self._counted(replacement)
            await self.store.approvals.create(replacement)
        try:
            updated = await self.store.approvals.decide(cmd, now=self.clock.now())
        except EngineError:
            if replacement is not None:
                await self.store.approvals.transition(
                    replacement.id,
                    target=Status.CANCELLED,
                    expected_version=None,
                    actor="system",
                    now=self.clock.now(),
                    reason="modification refused",
                )
            raise
        if window is not None:
            window.mark(updated)
        if replacement is not None:
            await self.announce(await self.store.approvals.get(replacement.id))
        return await self._after_decision(updated, kind)

    def _trust_until(self, kind: DecisionKind) -> float | None:
        """When the grant a Trust makes ends (the store writes it in the decision's atomic step)."""
        return self.clock.now() + self.policy.spec.trust_ttl if kind is DecisionKind.TRUST else None

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
        self, current: Approval, request: DecideRequest
    ) -> tuple[dict[str, Any] | None, Approval | None]:
        """The checks a decision passes before the store's atomic step: the edited arguments (validated) and the
        replacing approval when the edit needs other approvers. A refusal here is audited by the caller."""
        kind, reason, args = request.kind, request.reason, request.args
        if kind is DecisionKind.FEEDBACK and current.kind not in _ANSWERED_BY_FEEDBACK:
            raise InvalidInput(
                f"feedback goes to review gates; {current.id} is a {current.tool} action: reject it with a reason, "
                "or modify its arguments",
                approval_id=current.id,
            )
        if kind is DecisionKind.REJECT and not reason and current.reason_required:
            raise InvalidInput(
                f"rejecting {current.tool} needs a reason; pass --reason or fill in the reason field",
                approval_id=current.id,
            )
        if kind is not DecisionKind.MODIFY:
            return None, None
        if args is None:
            raise InvalidInput("modify needs the edited arguments (--args JSON)", approval_id=current.id)
        if "batch" in current.metadata:
            raise InvalidInput("a batch cannot be modified item by item; reject it and propose a new batch")
        if not current.modifiable:
            asker = current.metadata.get("framework", "its asker")
            raise InvalidInput(
                f"{current.id} cannot be modified: {asker} cannot run edited arguments; approve it as it is, or "
                "reject it with a reason that says what to change",
                approval_id=current.id,
            )
        edited = dict(args) if request.replace_args else merge_patch(current.execute_args, args)
        new_args = self._validated(current, edited)
        return new_args, await self._replacement_if_riskier(current, new_args)

    async def _after_decision(self, updated: Approval, kind: DecisionKind) -> Approval:
        if kind is DecisionKind.MODIFY and updated.status is Status.APPROVED:
            # What will run is the edit: its windows count the edited arguments, not the proposed ones.
            await self._forget_windows(updated)
            await self._count_windows(updated.tool, updated.execute_args, _window_events(updated))
        outcome = (
            _OUTCOMES.get(kind) if updated.status in (Status.APPROVED, Status.REJECTED, Status.SUPERSEDED) else None
        )
        if outcome is not None and is_practice(updated):
            found = caught(updated)
            if found is not None:
                missed_or_caught = Outcome.SEEDED_CAUGHT if found else Outcome.SEEDED_MISSED
                await self._tally(updated.tool, str(updated.tier), missed_or_caught, now=self.clock.now())
        elif outcome is not None and is_spot_check(updated):
            await self._spot_checked(updated, outcome)
        elif outcome is not None:  # final (a first vote of two is not); a superseding edit is a correction too
            now = self.clock.now()
            latency = now - updated.created_at
            await self._tally(updated.tool, str(updated.tier), outcome, now=now, latency=latency)
        await self._changed(updated, queued=True)
        return updated

    async def _spot_checked(self, check: Approval, outcome: Outcome) -> None:
        """A spot check's answer counts toward its tool's correction rate (a flag is a correction) and audit yield;
        a flag is also a webhook event."""
        now, tool, tier = self.clock.now(), checked_tool(check), str(check.metadata.get("tier", ""))
        await self._tally(tool, tier, outcome, now=now)
        if outcome is Outcome.REJECTED:
            await self._tally(tool, tier, Outcome.SPOT_FLAGGED, now=now)
            if self.events is not None:
                data = {**approval_data(check), "flag": {"by": check.decisions[-1].reviewer, "note": check.reason}}
                await self._safe(self.events.emit(EventKind.SPOT_CHECK_FLAGGED, f"spot_check.flagged:{check.id}", data))

    async def _tally(self, tool: str, tier: str, outcome: Outcome, *, now: float, latency: float | None = None) -> None:
        """Count an event for the metrics (:mod:`hitl.engine.domain.tally`); a metric never blocks an action."""
        try:
            await self.store.tallies.add(counts_for(tool, tier, outcome, now=now, latency=latency), now=now)
        except Exception:
            log.exception("a metric count failed; the action itself is unaffected")

    @property
    def _decision_jobs(self) -> tuple[str, ...]:
        return self.notifier.decision_jobs if self.notifier is not None else ()

    def _validated(self, current: Approval, args: dict[str, Any]) -> dict[str, Any]:
        """Edited arguments checked against the schema snapshot the reviewer saw, else the tool's declared one."""
        clean = _clean_args(current.tool, args)
        if current.args_schema is not None:
            clean = validate_args(current.tool, current.args_schema, clean)
        return self.validate_args(current.tool, clean) if self.validate_args else clean

    async def _replacement_if_riskier(self, current: Approval, new_args: dict[str, Any]) -> Approval | None:
        """Re-run the policy on the edited arguments; a higher tier (or a quorum) needs a new approval."""
        verdict = await self.explain(
            current.tool, new_args, session_id=current.session_id, requester=current.requester, instead_of=current
        )
        if verdict.denied:
            raise PolicyError(
                f"the edited {current.tool} is denied by policy; reject it instead",
                code=ErrorCode.POLICY_DENIED,
                approval_id=current.id,
            )
        if verdict.tier.rank <= current.tier.rank and current.quorum == 1 and verdict.quorum <= 1:
            return None
        tier = max(verdict.tier, current.tier, key=lambda t: t.rank)
        digest = action_hash(current.tool, new_args)
        dedupe = f"{current.dedupe_key}>{digest}"
        return Approval(
            id=approval_id(dedupe),
            session_id=current.session_id,
            dedupe_key=dedupe,
            tool=current.tool,
            args=new_args,
            action_hash=digest,
            tier=tier,
            kind=current.kind,
            rule=verdict.rule,
            reasons=(*verdict.reasons, f"modified from {current.id}"),
            why=verdict.why,
            summary=self._summary(current.tool, new_args),
            required_role=verdict.required_role or current.required_role,
            quorum=max(verdict.quorum, 1),
            requester=current.requester,
            created_at=self.clock.now(),
            expires_at=self.clock.now() + verdict.timeout,
            evidence=current.evidence,
            preview=current.preview,
            trustable=verdict.trustable,
            reason_required=verdict.reason_required or current.reason_required,
            metadata={
                **current.metadata,
                "supersedes": current.id,
                CHANGED: {k: list(v) for k, v in changes(current.execute_args, new_args).items()},
                **({TRUST_TTL: self.policy.spec.trust_ttl} if verdict.trustable else {}),
            },
            args_schema=current.args_schema,
        )

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
        await self._changed(updated)
        return updated

    async def expire_due(self, *, limit: int = 100) -> list[Approval]:
        """Expire what is due; an expiry is recorded as expiry, never as a rejection."""
        expired = await self.store.approvals.expire_due(now=self.clock.now(), limit=limit)
        for a in expired:
            if not is_spot_check(a) and not is_practice(a):  # no decision about an action
                await self._tally(a.tool, str(a.tier), Outcome.EXPIRED, now=self.clock.now())
            await self._changed(a)
        return expired

    async def announce(self, approval: Approval) -> None:
        """Tell reviewers and subscribers about a new approval (after it was stored)."""
        if is_spot_check(approval):  # counted for the audit yield, under the tool and tier it looks at
            tier = str(approval.metadata.get("tier", ""))
            await self._tally(checked_tool(approval), tier, Outcome.SPOT_CHECKED, now=approval.created_at)
        elif is_practice(approval):  # never in the other measures
            await self._tally(approval.tool, str(approval.tier), Outcome.SEEDED, now=approval.created_at)
        else:
            await self._tally(approval.tool, str(approval.tier), Outcome.ASKED, now=approval.created_at)
        if self.notifier is not None:
            await self._safe(self.notifier.approval_requested(approval))
        await self._event(approval, created=True)
        if not is_spot_check(approval) and not is_practice(approval):
            rate = self.seeded.rate_for(approval.tool, str(approval.tier))
            if seeded(approval.id, rate):
                await self._safe(self._seed(approval))

    async def _seed(self, real: Approval) -> None:
        """A practice twin of ``real``: the same tool, reviewers and wording, its arguments with one planted defect,
        in a session of its own; no run owns it and nothing executes it. Arguments the schema refuses are not
        planted (nothing unchecked enters)."""
        defect = defect_for(self.seeded, real.tool, real.id)
        args = merge_patch(real.args, defect.set)
        schema = real.args_schema
        if schema is not None:
            try:
                validate_args(real.tool, schema, args)
            except InvalidInput as exc:
                log.warning("defect %s of %s does not fit its schema; not planted: %s", defect.name, real.tool, exc)
                return
        # Random, never derived from the real approval: nothing that knows the real one can name its twin (or the
        # twin's session), and the id has the same form as any approval's.
        key = secrets.token_hex(16)
        now = self.clock.now()
        twin = real.model_copy(
            update={
                "id": approval_id(key),
                "session_id": new_session_id(),
                "dedupe_key": key,
                "args": args,
                "action_hash": action_hash(real.tool, args),
                "summary": self._summary(real.tool, args),
                "created_at": now,
                "expires_at": now + (real.expires_at - real.created_at),
                "version": 1,
                "kind": ApprovalKind.PRACTICE,
                "status": Status.PENDING,
                "decisions": (),
                "approved_args": None,
                "superseded_by": None,
                "reason": None,
                "metadata": {
                    **{k: real.metadata[k] for k in ("framework", "agent", TRUST_TTL) if k in real.metadata},
                    # A call id like the real one's (an agent-proposed approval shows one), never the same one.
                    **({"call_id": _like(str(real.metadata["call_id"]))} if "call_id" in real.metadata else {}),
                    "of": real.id,
                    POST_AFTER: post_after(self.seeded, now),
                    "defect": defect.name,
                    "says": defect.says,
                    "modifiable": real.modifiable,
                },
            }
        )
        stored, created = await self.store.approvals.create(twin)
        if created:
            await self.announce(stored)

    async def _changed(self, approval: Approval, *, queued: bool = False) -> None:
        if approval.status in _NEVER_RAN:
            await self._forget_windows(approval)
        if self.notifier is not None:
            await self._safe(self.notifier.approval_changed(approval, queued=queued))
        await self._event(approval)

    async def _counted(self, approval: Approval) -> Approval:
        """``approval`` (a replacement for an edit) with its arguments counted in the windows its rules keep."""
        events = [[key, approval.dedupe_key] for key in self.policy.window_keys(approval.tool, approval.args)]
        await self._count_windows(approval.tool, approval.args, events)
        return approval.model_copy(update={"metadata": {**approval.metadata, WINDOWS: events}}) if events else approval

    async def _count_windows(
        self, tool: str, args: Mapping[str, Any], events: list[tuple[str, str]] | list[list[str]]
    ) -> None:
        now = self.clock.now()
        ids = dict((str(k), str(e)) for k, e in events)
        for key, (window, amount) in self.policy.window_keys(tool, args).items():
            if key in ids:
                await self.store.windows.add(key, amount=amount, now=now, window=window, event_id=ids[key])

    async def _forget_windows(self, approval: Approval) -> None:
        """Rolling sums and velocity count what ran or may still run: an approval that ended without running (rejected,
        superseded by an edit, expired, cancelled) leaves its windows. A failure here leaves it counted: the rules
        stay stricter, never looser."""
        for key, event in _window_events(approval):
            await self._safe(self.store.windows.forget(key, event_id=event))

    async def _event(self, approval: Approval, *, created: bool = False) -> None:
        found = approval_event(approval, created=created) if self.events is not None else None
        if found is not None and self.events is not None:
            await self._safe(self.events.emit(*found, approval_data(approval)))

    async def _safe(self, aw: Awaitable[object]) -> None:
        # A notification failure must never undo or block a recorded decision; the bot retries updates.
        try:
            await aw
        except Exception:
            log.exception("notification failed; the decision itself is recorded")


_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/\-]{0,127}$")


def _like(value: str) -> str:
    """A random string as long as ``value`` (at least 8 characters), from URL-safe characters."""
    return secrets.token_urlsafe(max(len(value), 8))[: max(len(value), 8)]


def _window_events(approval: Approval) -> list[tuple[str, str]]:
    """The window events (key, event id) an approval's proposal added."""
    return [(str(k), str(e)) for k, e in approval.metadata.get(WINDOWS) or ()]


@dataclass
class _Action:
    """A proposed action's identity, computed only when something records it (a window rule or an approval): an
    allowed call with no stateful rule pays for neither hash."""

    request: ProposeRequest
    items: list[dict[str, Any]]
    clean: dict[str, Any]
    requester: str
    """Who asks (the request's requester, else the service's)."""

    @functools.cached_property
    def digest(self) -> str:
        """The action hash (a batch's: of the exact ordered items)."""
        tool = self.request.tool
        if self.request.batch is not None:
            return batch_hash([(tool, a) for a in self.items])
        return action_hash(tool, self.clean)

    @functools.cached_property
    def dedupe(self) -> str:
        """The key that makes asking again return the same approval: the requester's, so an identity asking the
        same action in the same session never attaches to another identity's approval (nor waits on it)."""
        scope = self.request.dedupe_scope if self.request.dedupe_scope is not None else self.request.session_id
        return dedupe_key(self.requester, self.request.dedupe_key or f"{scope}:{self.digest}")


def _not_reserved(tool: str) -> None:
    """A proposed action's tool may not carry a prefix hitl's own approvals use (``gate:``, ``doubt:``, ...)."""
    if isinstance(tool, str) and tool.startswith(RESERVED_PREFIXES):
        prefix = tool.split(":", 1)[0]
        raise InvalidInput(
            f"tool name {tool[:60]!r} starts with {prefix!r}:, which hitl keeps for its own approvals; rename the tool",
            tool=tool[:128],
        )


def _clean_args(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    # Tool names are identifiers: a proposal cannot smuggle prose ("refund, approved by the CFO") into the
    # trusted part of a review card through its name.
    if not isinstance(tool, str) or not _TOOL_NAME.match(tool):
        raise InvalidInput(
            f"tool name {str(tool)[:60]!r} is not an identifier: use 1-128 letters, digits and _ . : / -",
            tool=str(tool)[:128],
        )
    return _plain_args(tool, args)


def _plain_args(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` as plain, normalised JSON data (see :func:`normalize`), else :class:`InvalidInput`."""
    if type(args) is not dict and not isinstance(args, Mapping):
        raise InvalidInput(f"arguments for {tool} must be a JSON object, not {type(args).__name__}", tool=tool)
    clean = normalize(args)
    assert isinstance(clean, dict)
    return clean
