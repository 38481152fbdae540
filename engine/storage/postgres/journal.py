"""A run's step boundaries in PostgreSQL: each :class:`~hitl.engine.domain.journal.Commit` is one transaction."""

from __future__ import annotations

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.ids import check_same_action
from hitl.engine.domain.journal import ClaimIntent, Commit, Committed, Opened, OutcomeRecord, committable_version
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import Claim
from hitl.engine.errors import ClaimRefused, EngineError, IllegalTransition, NotFound
from hitl.engine.storage.codec import audit_for_creation, audit_for_decision, dumps, loads
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit, load_approval, load_claim, write_approval, write_claim

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

        out = await self.db.run(tx)
        self.db.changed(*touched)  # creations reach watchers by their NOTIFY
        return out

    async def open(self, run_id: str, *, holder: str, now: float, lease: float) -> Opened:
        async def tx(c: Conn) -> Opened:
            row = await c.fetchrow("SELECT data, version FROM checkpoints WHERE run_id = $1", run_id)
            if row is None:
                raise NotFound(f"no run {run_id!r}; `hitl sessions list` lists paused runs", session_id=run_id)
            if not await own_run(c, run_id, holder, now, lease):
                owner = await c.fetchval("SELECT holder FROM run_owners WHERE run_id = $1", run_id)
                raise claim_rules.not_owner(run_id, owner)
            data = loads(row[0])
            waiting = data.get("waiting")
            found = await c.fetchval("SELECT doc FROM approvals WHERE id = $1", waiting) if waiting else None
            trusted = await c.fetch("SELECT tool FROM trust WHERE session_id = $1 AND until > $2", run_id, now)
            return Opened(
                data=data,
                version=int(row[1]),
                waiting=Approval.model_validate_json(found) if found else None,
                trusted=frozenset(str(t[0]) for t in trusted),
            )

        return await self.db.run(tx)


async def own_run(c: Conn, run_id: str, holder: str, now: float, lease: float) -> bool:
    """Take or renew the lease on ``run_id`` for ``holder``: False when another holder's lease still runs."""
    row = await c.fetchrow("SELECT holder, lease_until FROM run_owners WHERE run_id = $1", run_id)
    if row is not None and row[0] != holder and row[1] > now:
        return False
    await c.execute(
        "INSERT INTO run_owners (run_id, holder, lease_until) VALUES ($1, $2, $3) "
        "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until",
        run_id,
        holder,
        now + lease,
    )
    return True


async def _commit(c: Conn, m: Commit, touched: list[str]) -> Committed:
    # -- preconditions: any failing refuses the whole commit (the transaction rolls back; nothing is written yet)
    row = await c.fetchrow(
        "SELECT (SELECT holder FROM run_owners WHERE run_id = $1), (SELECT lease_until FROM run_owners "
        "WHERE run_id = $1), (SELECT version FROM checkpoints WHERE run_id = $1)",
        m.run_id,
    )
    assert row is not None  # scalar subqueries: always one row
    version = committable_version(m, row[0], row[1], row[2])
    finished: Claim | None = None
    if m.outcome is not None:
        o = m.outcome
        finished = claim_rules.finished(
            await load_claim(c, o.key), key=o.key, holder=m.holder, attempt=o.attempt, ok=o.ok, result=o.result
        )
    asked: Approval | None = None
    if m.ask is not None:
        found = await c.fetchval("SELECT doc FROM approvals WHERE id = $1", m.ask.id)
        if found is not None:
            asked = Approval.model_validate_json(found)
            check_same_action(asked, m.ask)
            if asked.status is not Status.PENDING:
                return Committed(applied=False, version=version, approval=asked)
    # -- writes
    if m.own:
        await c.execute(
            "INSERT INTO run_owners (run_id, holder, lease_until) VALUES ($1, $2, $3) "
            "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until",
            m.run_id,
            m.holder,
            m.now + m.lease,
        )
    if finished is not None:
        await write_claim(c, finished)
        assert m.outcome is not None
        if m.outcome.ok and m.outcome.approval_id:
            await _executed(c, m.outcome, m, touched)
    if m.checkpoint is not None:
        version = m.expected_version + 1
        await c.execute(
            "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
            "updated_at = excluded.updated_at, status = excluded.status",
            m.run_id,
            version,
            dumps(m.checkpoint),
            m.now,
            str(m.checkpoint.get("status", "")),
        )
    for entry in m.events:
        await insert_audit(c, entry)
    created = False
    if m.ask is not None and asked is None:
        await write_approval(c, m.ask, insert=True)
        await insert_audit(c, audit_for_creation(m.ask))
        asked, created = m.ask, True
        touched.append(m.ask.id)
    claim: Claim | None = None
    refused: EngineError | None = None
    if m.claim is not None:
        try:
            async with c.transaction():  # a savepoint: a refused claim leaves the rest of the commit standing
                claim = await _claim(c, m.claim, m, touched)
        except (ClaimRefused, IllegalTransition) as exc:
            refused = exc
    if m.release:
        await c.execute("DELETE FROM run_owners WHERE run_id = $1 AND holder = $2", m.run_id, m.holder)
    return Committed(applied=True, version=version, claim=claim, claim_refused=refused, approval=asked, created=created)


async def _claim(c: Conn, intent: ClaimIntent, m: Commit, touched: list[str]) -> Claim:
    out = claim_rules.next_claim(
        await load_claim(c, intent.key),
        key=intent.key,
        action_hash=intent.action_hash,
        holder=m.holder,
        now=m.now,
        lease=m.lease,
        retry_failed=intent.retry_failed,
    )
    if intent.approval_id is None:
        if out.acquired:
            await write_claim(c, out)
        return out
    a = await load_approval(c, intent.approval_id)
    moves = claim_rules.claim_moves(out, a)  # refused before anything of the claim is written
    if out.acquired:
        await write_claim(c, out)
    for target in moves:
        a = await _move(c, a, target, m, touched)
    return out


async def _executed(c: Conn, o: OutcomeRecord, m: Commit, touched: list[str]) -> None:
    assert o.approval_id is not None
    a = await load_approval(c, o.approval_id)
    for target in claim_rules.steps_to_executed(a.status):  # done without being seen running: through executing
        a = await _move(c, a, target, m, touched)


async def _move(c: Conn, a: Approval, target: Status, m: Commit, touched: list[str]) -> Approval:
    updated = claim_rules.transitioned(a, target=target, expected_version=a.version, now=m.now, reason=None)
    await write_approval(c, updated)
    await insert_audit(c, audit_for_decision(updated, actor=m.holder, event=str(target), now=m.now))
    touched.append(a.id)
    return updated
