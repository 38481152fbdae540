"""A run's step boundaries in PostgreSQL: each :class:`~hitl.engine.domain.journal.Commit` is one transaction."""

from __future__ import annotations

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.ids import check_same_action
from hitl.engine.domain.journal import ClaimIntent, Commit, Committed, Opened, committable_version, held_by_another
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import Claim
from hitl.engine.errors import ClaimRefused, EngineError, IllegalTransition, NotFound
from hitl.engine.receipts.claims import withdrawn_refusal
from hitl.engine.storage.codec import audit_for_creation, audit_for_decision, loads
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.writes import State, Writes, read_state, state_digest_sql

__all__ = ["PgJournal", "own_run"]


class PgJournal:
    """:class:`hitl.engine.ports.Journal` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def commit(self, commit: Commit) -> Committed:
        touched: list[str] = []

        async def tx(c: Conn) -> Committed:
            touched.clear()  # a retried transaction starts again from nothing
            return await _commit(c, commit, touched)

        out = await self.db.run(tx, guarded=True)
        self.db.changed(*touched)  # creations reach watchers by their NOTIFY
        return out

    async def open(self, run_id: str, *, holder: str, now: float, lease: float) -> Opened:
        async def tx(c: Conn) -> Opened:
            # The checkpoint, its owner, the approval it waits on and the session's trusted tools: one read; the
            # ownership taken with a write guarded by the owner and the checkpoint version it was decided on.
            row = await c.fetchrow(_OPEN, run_id, now)
            if row is None:
                raise NotFound.run(run_id)
            owner, until = row[2], row[3]
            if held_by_another(owner, until, holder=holder, now=now):
                raise claim_rules.not_owner(run_id, owner)
            state = State(owner=owner, owned_until=until, version=int(row[1]), read=(run_id, [], [], [], [], row[6]))
            w = Writes(state, guarded=True)
            w.own(run_id, holder, now + lease)
            await w.send(c)
            return Opened(
                data=loads(row[0]),
                version=int(row[1]),
                waiting=Approval.model_validate_json(row[4]) if row[4] else None,
                grants=frozenset((str(g[0]), str(g[1])) for g in map(loads, row[5])),
            )

        return await self.db.run(tx, guarded=True)


_OPEN = (
    "SELECT data, version, (SELECT holder FROM run_owners WHERE run_id = $1), "
    "(SELECT lease_until FROM run_owners WHERE run_id = $1), "
    "(SELECT doc FROM approvals WHERE id = checkpoints.data::json ->> 'waiting'), "
    "ARRAY(SELECT json_build_array(requester, tool)::text FROM trust_grants WHERE session_id = $1 AND until > $2), "
    f"{state_digest_sql('$1', [], [], [])} "
    "FROM checkpoints WHERE run_id = $1"
)
"""A run to resume, in one row: its checkpoint, owner, lease, waited-on approval, trust grants, and the digest
that guards taking it over (the run's :func:`state_sql` row, nothing else named)."""


async def own_run(c: Conn, run_id: str, holder: str, now: float, lease: float) -> bool:
    """Take or renew the lease on ``run_id`` for ``holder``: False when another holder's lease still runs."""
    row = await c.fetchrow("SELECT holder, lease_until FROM run_owners WHERE run_id = $1", run_id)
    if row is not None and held_by_another(row[0], row[1], holder=holder, now=now):
        return False
    w = Writes()
    w.own(run_id, holder, now + lease)
    await w.send(c)
    return True


async def _commit(c: Conn, m: Commit, touched: list[str]) -> Committed:
    # Everything the rules look at, in one read: the owner and checkpoint version, the claims and approvals named,
    # and the heads of every audit chain the commit may append to.
    keys = {k for k in (m.outcome.key if m.outcome else None, m.claim.key if m.claim else None) if k}
    ids = {
        i
        for i in (
            m.ask.id if m.ask else None,
            m.outcome.approval_id if m.outcome else None,
            m.claim.approval_id if m.claim else None,
        )
        if i
    }
    chains = ids | {e.approval_id or "" for e in m.events}
    # A receipt issued with the claim: its approval (a batch's, for an item) refuses it once withdrawn, and its
    # issue's entry joins that approval's chain.
    issued = m.claim.receipt.audit if m.claim and m.claim.receipt and m.claim.receipt.audit else None
    withdrawals = {issued.approval_id} if issued is not None and issued.approval_id else set()
    found = await read_state(
        c, run_id=m.run_id, claims=keys, approvals=ids, chains=chains | withdrawals, withdrawals=withdrawals
    )
    # -- preconditions: any failing refuses the whole commit (nothing is sent)
    version = committable_version(m, found.owner, found.owned_until, found.version)
    claims, approvals = found.claims, found.approvals
    finished: Claim | None = None
    if m.outcome is not None:
        o = m.outcome
        finished = claim_rules.finished(
            claims.get(o.key), key=o.key, holder=m.holder, attempt=o.attempt, ok=o.ok, result=o.result
        )
    # After the run's own preconditions, as on the other stores: a worker that lost the run, or read it stale, is
    # told so (it hands the run over, or reads it again), not that the approval was withdrawn.
    if found.withdrawn:  # the whole commit with it: nothing runs, or is recorded, by a withdrawn approval
        raise withdrawn_refusal(next(iter(found.withdrawn)))
    asked: Approval | None = None
    if m.ask is not None:
        asked = approvals.get(m.ask.id)
        if asked is not None:
            check_same_action(asked, m.ask)
            if asked.status is not Status.PENDING:
                return Committed(applied=False, version=version, approval=asked)
    # -- writes, decided here and sent as one statement
    w = Writes(found, guarded=True)
    if m.own:
        w.own(m.run_id, m.holder, m.now + m.lease)
    if finished is not None:
        w.claim(finished)
        claims[finished.key] = finished
        assert m.outcome is not None
        if m.outcome.ok and m.outcome.approval_id:
            a = _approval(approvals, m.outcome.approval_id)
            for target in claim_rules.steps_to_executed(a.status):  # done without being seen running
                a = _move(w, approvals, a, target, m)
    if m.checkpoint is not None:
        version = m.expected_version + 1
        w.checkpoint(m.run_id, version, m.checkpoint, m.now)
    for entry in m.events:
        w.audit(entry)
    created = False
    if m.ask is not None and asked is None:
        w.approval(m.ask, insert=True)
        w.audit(audit_for_creation(m.ask))
        asked, created = m.ask, True
        approvals[m.ask.id] = m.ask
    claim: Claim | None = None
    refused: EngineError | None = None
    if m.claim is not None:
        try:  # a refused claim writes nothing of its own and leaves the rest of the commit standing
            claim = _claim(w, claims, approvals, m.claim, m)
        except (ClaimRefused, IllegalTransition) as exc:
            refused = exc
    if m.release:
        w.release(m.run_id, m.holder)
    await w.send(c)
    touched.extend(w.changed)
    return Committed(applied=True, version=version, claim=claim, claim_refused=refused, approval=asked, created=created)


def _claim(
    w: Writes, claims: dict[str, Claim], approvals: dict[str, Approval], intent: ClaimIntent, m: Commit
) -> Claim:
    out = claim_rules.next_claim(
        claims.get(intent.key),
        key=intent.key,
        action_hash=intent.action_hash,
        holder=m.holder,
        now=m.now,
        lease=m.lease,
        retry_failed=intent.retry_failed,
    )
    if intent.approval_id is None:
        if out.acquired:
            w.claim(out, receipt=intent.receipt)
        return out
    a = _approval(approvals, intent.approval_id)
    moves = claim_rules.claim_moves(out, a)  # refused before anything of the claim is written
    # Every move is checked before any is collected: a refused one leaves nothing of the claim behind.
    updates = []
    for target in moves:
        a = claim_rules.transitioned(a, target=target, expected_version=a.version, now=m.now, reason=None)
        updates.append(a)
    if out.acquired:
        w.claim(out, receipt=intent.receipt)
    for updated in updates:
        _record_move(w, approvals, updated, m)
    return out


def _approval(approvals: dict[str, Approval], approval_id: str) -> Approval:
    found = approvals.get(approval_id)
    if found is None:
        raise NotFound.approval(approval_id)
    return found


def _move(w: Writes, approvals: dict[str, Approval], a: Approval, target: Status, m: Commit) -> Approval:
    updated = claim_rules.transitioned(a, target=target, expected_version=a.version, now=m.now, reason=None)
    _record_move(w, approvals, updated, m)
    return updated


def _record_move(w: Writes, approvals: dict[str, Approval], updated: Approval, m: Commit) -> None:
    w.approval(updated)
    w.audit(audit_for_decision(updated, actor=m.holder, event=str(updated.status), now=m.now))
    approvals[updated.id] = updated
