"""The e-mail channel of ``hitl serve``: a sweeper of its background loop that queues one message per approval per
reviewer, then sends what is due, paced, retrying with backoff.

Never inline in a propose: an approval is mailed by the server that sweeps the store, whoever created it (an agent
process, ``hitl run``, the API). Queueing is once per approval, under an execution claim on ``mail:<approval id>``
(as events are queued, :class:`~hitl.engine.subscribers.events.Outbox`): one durable ``mail`` job per recipient, each
audited ``mail_queued``. Sending checks the approval first: one no longer pending is not mailed (a decision on any
channel closes the others). Each answer is audited on the approval: ``mail_sent`` with the server's reply, or
``mail_refused`` with its code; a refusal the server would repeat (5xx) is final, anything else is retried (30 s,
1 min, 2 min ... at most an hour apart) up to ``email.max_attempts``. Delivery is at least once: a crash between the
server's acceptance and the job's acknowledgement sends the message again. A reviewer gets at most :data:`CAP`
messages in :data:`CAP_WINDOW`, counted in the store (shared by replicas); past that, one digest.

Beyond approvals, the same sweep tells ``email.alert_role`` what must be heard when Slack is away: each halt given or
lifted (:meth:`MailDelivery.notice`, also what :func:`or_by_mail` sends an alert Slack could not take by: the
built-in alert when cards stay undelivered is one, announced by the alerts watch like every alert).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter

from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder, halt_message
from hitl.engine.domain.models import Approval, ApprovalKind, Status
from hitl.engine.domain.own_confirmation import askers, confirms_own
from hitl.engine.domain.records import AuditEntry, ClaimState, Job
from hitl.engine.errors import ClaimRefused, NotFound
from hitl.engine.ports import Clock, Store
from hitl.mail.message import approval_message, digest_message, notice_message
from hitl.mail.smtp import SmtpOutcome, SmtpSender, credentials

__all__ = [
    "BURST",
    "CAP",
    "CAP_CLAIM",
    "CAP_WINDOW",
    "CARD_CLAIM",
    "LEASE",
    "MAIL_JOB",
    "MailDelivery",
    "backoff",
    "mail_delivery",
    "or_by_mail",
    "recipients",
]

log = logging.getLogger(__name__)

MAIL_JOB = "mail"
"""One message to send (payload: ``approval_id``, ``reviewer``, ``attempt``, ``not_before``)."""
LEASE = 60.0
"""Seconds a claimed message stays with this process; a crashed sender's are picked up after it."""
BURST = 10
"""Messages a quiet sender may send at once before the pace holds it."""
CAP = 5
CAP_WINDOW = 600.0
"""At most :data:`CAP` messages per reviewer in :data:`CAP_WINDOW` seconds: past the cap's last message, the rest
wait, and go together in one digest once the window leaves room (a flood is a few messages, not hundreds)."""
_MAILED_KINDS = frozenset({ApprovalKind.ACTION, ApprovalKind.DOUBT, ApprovalKind.GATE, ApprovalKind.REVIEW})
"""What is mailed: a question that waits on a person. A practice twin or a spot check is not (neither is urgent,
and a twin mailed unlike its original would give itself away)."""
CARD_CLAIM = "notify:"
"""The Slack notifier's claim on posting an approval's card (``notify:<id>``): failed when Slack refused it."""
CAP_CLAIM = "mail:cap:"
"""The ledger keys of the cap's slots (``mail:cap:<reviewer>:<n>``, :data:`CAP` of them): each held for
:data:`CAP_WINDOW` by the message it counted, across replicas."""
_QUEUED = "mail"
"""The action hash recorded on a queueing claim (the claim only says "queued"; nothing is hashed)."""


def backoff(attempt: int) -> float:
    """Seconds before attempt ``attempt + 1`` (doubling from 30 s, at most an hour)."""
    return float(min(30 * 2 ** (attempt - 1), 3600))


def recipients(config: HitlConfig, a: Approval, *, now: float) -> list[str]:
    """Who ``a``'s card would reach and has an e-mail contact: its role's members (every role's, when it names
    none), and its backup role's once it has been handed on by ``now``; never who asked (its requester, the person
    it acts for). A ``self`` approval is its person's alone to confirm: mailed to them only."""
    if confirms_own(a):
        return [m for m in (a.on_behalf_of,) if m is not None and m in config.contacts]
    roles = config.build_roles()
    members = set(roles.members_of(a.required_role))
    if a.handed_on(now):
        members |= roles.members_of(a.backup_role)
    return sorted(m for m in members if m in config.contacts and m not in askers(a))


class MailDelivery:
    """A sweeper for ``hitl serve``'s background loop: queue the messages pending approvals imply, send what is
    due."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        config: Callable[[], HitlConfig],
        sender: SmtpSender,
        *,
        consumer: str,
        batch: int = 200,
        count: Callable[[str, str], None] = lambda kind, outcome: None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        """The served ``hitl.yaml`` as it is now (a reload's contacts and roles apply to the next message)."""
        self.sender = sender
        self.consumer = consumer
        self.batch = batch
        self.count = count
        """Counts each message handed to the server: its kind (``message``, ``digest``, ``alert``) and outcome
        (``sent``, ``refused``), for ``/metrics``."""
        self._cursor: str | None = None
        self._queued: set[str] = set()
        """Approvals whose messages this process saw queued (skipped without a store round trip): those still
        pending at the end of the last whole pass, and those queued since."""
        self._pending: set[str] = set()
        self._halts: dict[str, HaltOrder] | None = None
        self._allowance = float(BURST)
        self._paced_at: float | None = None

    async def sweep(self) -> None:
        """Tell of the stop switch, queue, then send."""
        await self.halts()
        await self.queue()
        await self.send()

    async def halts(self) -> None:
        """E-mail each halt given or lifted since the last sweep to ``email.alert_role`` (once across replicas):
        when Slack is away, its card updates reach nobody, and a halt must be heard. The first read at start is the
        baseline: what stood before was told by the process that saw it change."""
        orders = {o.scope: o for o in await self.store.halts.active()}
        before, self._halts = self._halts, orders
        if before is None or before == orders:
            return
        for scope in sorted(set(orders) | set(before)):
            given, old = orders.get(scope), before.get(scope)
            if given == old:
                continue
            order = given or old
            assert order is not None
            what = "every tool" if scope == EVERY_TOOL else scope
            said = halt_message(order, scope) if given else f"{what} may run again (the halt by {order.by} was lifted)"
            key = f"mail:halt:{scope}:{order.at}:{'given' if given else 'lifted'}"
            try:
                claim = await self.store.ledger.claim(
                    key, action_hash=_QUEUED, holder=self.consumer, now=self.clock.now(), lease=600.0
                )
            except ClaimRefused:
                continue  # another replica is telling it
            if claim.acquired:  # one replica tells it
                await self.notice(f"[hitl] {'Halted' if given else 'Halt lifted'}: {what}", said)

    async def queue(self, *, pages: int = 5, page_size: int = 200) -> None:
        """Queue the messages of pending approvals nobody queued: ``pages`` pages per sweep, resuming where the
        last sweep stopped."""
        config = self.config()
        spec = config.email
        if spec is None:
            return
        for _ in range(pages):
            page = await self.store.approvals.list_pending(limit=page_size, cursor=self._cursor)
            self._cursor = page.cursor
            for a in page.items:
                self._pending.add(a.id)
                if a.kind not in _MAILED_KINDS:
                    continue
                if a.id in self._queued:
                    continue
                why = "" if spec.mails(a.tool, a.tier) else await self._failing_over(config, a)
                if why is not None:
                    await self._queue_one(a, recipients(config, a, now=self.clock.now()), why)
            if page.cursor is None:  # a whole pass: what it did not see is no longer pending
                self._queued &= self._pending
                self._pending = set()
                return

    async def _failing_over(self, config: HitlConfig, a: Approval) -> str | None:
        """Why ``a`` fails over to e-mail now (None: it does not, or not yet): Slack refused its card, no card was
        posted within the bound, or nobody decided by the share of its time ``failover.after`` names."""
        failover = config.failover_for(a)
        if failover is None:
            return None
        now = self.clock.now()
        if await self.store.messages.get(a.id) is None:
            posting = await self.store.ledger.get(f"{CARD_CLAIM}{a.id}")
            if posting is not None and posting.state is ClaimState.FAILED:
                return f"failover: Slack refused the card: {(posting.result or {}).get('error', 'unknown error')}"
            if now >= a.created_at + failover.card_within:
                return f"failover: no card posted within {failover.card_within:g} s"
        due = failover.unanswered_at(a.created_at, a.expires_at)
        if due is not None and now >= due and not a.decisions:
            return f"failover: no decision after {failover.after} of its time"
        return None

    async def _queue_one(self, a: Approval, to: list[str], why: str = "") -> None:
        key, now = f"mail:{a.id}", self.clock.now()
        try:
            claim = await self.store.ledger.claim(key, action_hash=_QUEUED, holder=self.consumer, now=now, lease=60.0)
        except ClaimRefused:
            return  # being queued right now by another replica
        if claim.acquired:
            for reviewer in to:
                payload = {"approval_id": a.id, "reviewer": reviewer, "attempt": 1, "not_before": now}
                await self.store.jobs.enqueue(MAIL_JOB, payload, now=now)
                await self._audit(a, "mail_queued", f"to {reviewer}" + (f" ({why})" if why else ""))
            await self.store.ledger.record_outcome(
                key, holder=self.consumer, attempt=claim.attempt, ok=True, result={}, now=self.clock.now()
            )
        self._queued.add(a.id)

    def _paced(self) -> int:
        """How many messages the pace allows now: ``1 / email.pace`` a second, up to :data:`BURST` saved up."""
        spec, now = self.config().email, self.clock.now()
        if spec is None or spec.pace == 0:
            return self.batch
        if self._paced_at is not None:
            self._allowance = min(float(BURST), self._allowance + (now - self._paced_at) / spec.pace)
        self._paced_at = now
        return int(self._allowance)

    async def send(self) -> None:
        """Send the due messages the pace allows, each reviewer's within their cap (a digest past it)."""
        room = min(self._paced(), self.batch)
        if room <= 0:
            return
        now = self.clock.now()
        jobs = await self.store.jobs.claim(self.consumer, kind=MAIL_JOB, limit=room, now=now, lease=LEASE)
        by_reviewer: dict[str, list[Job]] = {}
        for job in jobs:  # one not due comes back when the lease runs out
            if float(job.payload.get("not_before", 0)) <= now:
                by_reviewer.setdefault(str(job.payload.get("reviewer", "")), []).append(job)
        for reviewer, batch in by_reviewer.items():
            await self._send_to(reviewer, batch)

    async def _send_to(self, reviewer: str, jobs: list[Job]) -> None:
        """Send ``reviewer`` their due messages: one each while their cap leaves room after them, else one digest
        of them all; none past the cap (held: they come back when the lease runs out)."""
        config = self.config()
        contact = config.contacts.get(reviewer)
        live: list[tuple[Job, Approval]] = []
        for job in jobs:
            try:
                a = await self.store.approvals.get(str(job.payload.get("approval_id", "")))
            except NotFound:
                a = None  # removed by retention since: nothing left to tell
            if a is None or a.status is not Status.PENDING or contact is None:
                await self.store.jobs.ack(job.id)  # decided (the other channels close with it), or no address
            else:
                live.append((job, a))
        if not live or config.email is None or config.web is None or contact is None:
            return
        now = self.clock.now()
        left = await self._room(reviewer)
        if not left:
            return
        if len(live) < len(left) or len(live) == 1:
            for (job, a), slot in zip(live, left, strict=False):
                if not await self._take(slot):
                    return  # another replica took it since: the rest are held
                message = approval_message(
                    a,
                    config.present(a),
                    spec=config.email,
                    to=contact.email,
                    link=config.web.approval_url(a.id),
                    host=urlsplit(config.web.public_url).netloc,
                    redactor=config.build_redactor(),
                    now=now,
                )
                await self._deliver(message, contact.email, [(job, a)], config.email.max_attempts, "")
            return
        if not await self._take(left[0]):
            return
        digest = digest_message(
            [(a, config.present(a)) for _, a in live],
            spec=config.email,
            to=contact.email,
            public_url=config.web.public_url,
            host=urlsplit(config.web.public_url).netloc,
            redactor=config.build_redactor(),
            now=now,
        )
        await self._deliver(digest, contact.email, live, config.email.max_attempts, f" (digest of {len(live)})")

    async def _room(self, reviewer: str) -> list[str]:
        """The cap's free slots for ``reviewer`` now (their ledger keys). The cap is kept in the store, so replicas
        on one store share it: a slot is a claim held for :data:`CAP_WINDOW` from the message it counted, free
        again once that lease has run out (the window slides)."""
        now, free = self.clock.now(), []
        for slot in range(CAP):
            key = f"{CAP_CLAIM}{reviewer}:{slot}"
            held = await self.store.ledger.get(key)
            if held is None or held.state is not ClaimState.RUNNING or held.lease_until <= now:
                free.append(key)
        return free

    async def _take(self, slot: str) -> bool:
        """Count one message against its reviewer's cap (False: another replica took that slot first)."""
        try:
            claim = await self.store.ledger.claim(
                slot, action_hash=_QUEUED, holder=self.consumer, now=self.clock.now(), lease=CAP_WINDOW
            )
        except ClaimRefused:
            return False
        return claim.acquired

    async def _deliver(
        self, message: EmailMessage, to: str, jobs: list[tuple[Job, Approval]], most: int, what: str
    ) -> None:
        """Hand ``message`` to the server for the approvals of ``jobs``, audit the answer on each, retry what may
        be retried, and acknowledge the jobs."""
        outcome = await self.sender.send(message, to=to)
        self._allowance -= 1
        self.count("digest" if len(jobs) > 1 else "message", "sent" if outcome.sent else "refused")
        for job, a in jobs:
            if outcome.sent:
                await self._audit(a, "mail_sent", f"to {job.payload.get('reviewer')}{what}: {outcome.detail}")
            else:
                await self._refused(a, job.payload, outcome, most)
            await self.store.jobs.ack(job.id)

    async def notice(self, subject: str, text: str) -> int:
        """Send ``text`` (an alert Slack could not take) to each member of ``email.alert_role`` (the oversight
        admin role by default) who has a contact, now, each answer audited: how many the server took."""
        config = self.config()
        if config.email is None:
            return 0
        role = config.email.alert_role or config.oversight.admin_role
        taken = 0
        for reviewer in sorted(config.build_roles().members_of(role) if role in config.roles else ()):
            contact = config.contacts.get(reviewer)
            if contact is None:
                continue
            message = notice_message(subject, text, spec=config.email, to=contact.email, now=self.clock.now())
            outcome = await self.sender.send(message, to=contact.email)
            taken += outcome.sent
            self.count("alert", "sent" if outcome.sent else "refused")
            await self.store.audit.append(
                AuditEntry(
                    at=self.clock.now(),
                    actor=self.consumer,
                    event="mail_sent" if outcome.sent else "mail_refused",
                    outcome="ok" if outcome.sent else f"smtp_{outcome.code}" if outcome.code else "unreachable",
                    detail=f"{subject} to {reviewer}: {outcome.detail}"[:500],
                )
            )
        return taken

    async def _refused(self, a: Approval, payload: dict[str, Any], outcome: SmtpOutcome, most: int) -> None:
        attempt = int(payload.get("attempt", 1))
        code = f"smtp_{outcome.code}" if outcome.code is not None else "unreachable"
        final = outcome.permanent or attempt >= most
        said = "gave up" if final else f"attempt {attempt + 1} in {backoff(attempt):.0f} s"
        await self._audit(a, "mail_refused", f"to {payload.get('reviewer')}: {outcome.detail} ({said})", code)
        log.warning("e-mail of %s to %s refused: %s (%s)", a.id, payload.get("reviewer"), outcome.detail, said)
        if not final:
            now = self.clock.now()
            # Queued again before the old job is acked: a crash in between sends twice, never not at all.
            await self.store.jobs.enqueue(
                MAIL_JOB, {**payload, "attempt": attempt + 1, "not_before": now + backoff(attempt)}, now=now
            )

    async def _audit(self, a: Approval, event: str, detail: str, outcome: str = "ok") -> None:
        entry = AuditEntry(
            at=self.clock.now(),
            actor=self.consumer,
            event=event,
            approval_id=a.id,
            version=a.version,
            outcome=outcome,
            detail=detail[:500],
        )
        await self.store.audit.append(entry)


def mail_delivery(
    started: HitlConfig,
    store: Store,
    clock: Clock,
    *,
    consumer: str,
    live: Callable[[], HitlConfig | None],
    registry: CollectorRegistry | None = None,
) -> MailDelivery | None:
    """The e-mail channel ``email:`` configures (None without one), refusing to start without its SMTP login when
    it names one (fail closed); its messages counted in ``registry`` (``/metrics``) when given. ``live``: the
    ``hitl.yaml`` last reloaded, whose roles apply to the next message (the rest of ``email:`` and ``contacts:`` as
    at start, like every section a reload does not follow)."""
    if started.email is None:
        return None
    sender = SmtpSender(started.email, credentials(started.email))

    def current() -> HitlConfig:
        last = live()
        if last is None or last.roles == started.roles:
            return started
        return started.model_copy(update={"roles": last.roles})

    if registry is None:
        return MailDelivery(store, clock, current, sender, consumer=consumer)
    messages = Counter(
        "hitl_mail_messages",
        "E-mail handed to the SMTP server, by kind and outcome",
        ["kind", "outcome"],
        registry=registry,
    )

    def count(kind: str, outcome: str) -> None:
        messages.labels(kind=kind, outcome=outcome).inc()

    return MailDelivery(store, clock, current, sender, consumer=consumer, count=count)


def or_by_mail(post: Callable[[str], Awaitable[None]], mail: MailDelivery | None) -> Callable[[str], Awaitable[None]]:
    """``post`` (an alert to Slack), or, when Slack cannot take it (revoked, archived, away), the same text by
    e-mail to ``email.alert_role``; still a failure when neither took it."""
    if mail is None:
        return post

    async def posted(text: str) -> None:
        try:
            await post(text)
        except Exception:
            log.warning("Slack could not take an alert; sending it by e-mail", exc_info=True)
            if not await mail.notice(f"[hitl] {text.splitlines()[0] if text else 'alert'}", text):
                raise

    return posted
