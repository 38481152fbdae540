"""A run's step boundaries in SQLite: each :class:`~hitl.engine.domain.journal.Commit` is one transaction."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.ids import check_same_action
from hitl.engine.domain.journal import ClaimIntent, Commit, Committed, Opened, OutcomeRecord, committable_version
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import Claim
from hitl.engine.errors import ClaimRefused, EngineError, IllegalTransition, NotFound
from hitl.engine.storage.codec import audit_for_creation, audit_for_decision, encode_json_form, loads
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.receipts import refuse_withdrawn
from hitl.engine.storage.sqlite.rows import (
    insert_audit,
    load_approval,
    load_claim,
    own_run,
    write_approval,
    write_claim,
)

__all__ = ["SqliteJournal"]


class SqliteJournal:
    """:class:`hitl.engine.ports.Journal` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def commit(self, commit: Commit) -> Committed:
        touched: list[str] = []
        out = await self.db.run(lambda c: _commit(c, commit, touched))
        self.db.changed(*touched)
        return out

    async def open(self, run_id: str, *, holder: str, now: float, lease: float) -> Opened:
        def tx(c: sqlite3.Connection) -> Opened:
            row = c.execute("SELECT data, version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise NotFound.run(run_id)
            other = own_run(c, run_id, holder, now, lease)
            if other is not None:
                raise claim_rules.not_owner(run_id, other)
            data = loads(row[0])
            waiting = data.get("waiting")
            found = c.execute("SELECT doc FROM approvals WHERE id = ?", (waiting,)).fetchone() if waiting else None
            grants = c.execute(
                "SELECT requester, tool FROM trust_grants WHERE session_id = ? AND until > ?", (run_id, now)
            ).fetchall()
            return Opened(
                data=data,
                version=int(row[1]),
                waiting=Approval.model_validate_json(found[0]) if found else None,
                grants=frozenset((str(r), str(t)) for r, t in grants),
            )

        return await self.db.run(tx)


_OWNER_AND_VERSION = (
    "SELECT (SELECT holder FROM run_owners WHERE run_id = :run), (SELECT lease_until FROM run_owners WHERE run_id = "
    ":run), (SELECT version FROM checkpoints WHERE run_id = :run)"
)
"""A run's owner and checkpoint version, read in one statement (every commit checks both first)."""


def _commit(c: sqlite3.Connection, m: Commit, touched: list[str]) -> Committed:
    # -- preconditions: any failing refuses the whole commit (the transaction rolls back; nothing is written yet)
    version = committable_version(m, *c.execute(_OWNER_AND_VERSION, {"run": m.run_id}).fetchone())
    finished: Claim | None = None
    if m.outcome is not None:
        o = m.outcome
        finished = claim_rules.finished(
            load_claim(c, o.key), key=o.key, holder=m.holder, attempt=o.attempt, ok=o.ok, result=o.result
        )
    asked: Approval | None = None
    if m.ask is not None:
        found = c.execute("SELECT doc FROM approvals WHERE id = ?", (m.ask.id,)).fetchone()
        if found is not None:
            asked = Approval.model_validate_json(found[0])
            check_same_action(asked, m.ask)
            if asked.status is not Status.PENDING:
                return Committed(applied=False, version=version, approval=asked)
    # -- writes
    if m.own:
        c.execute(
            "INSERT OR REPLACE INTO run_owners (run_id, holder, lease_until) VALUES (?, ?, ?)",
            (m.run_id, m.holder, m.now + m.lease),
        )
    if finished is not None:
        write_claim(c, finished)
        assert m.outcome is not None
        if m.outcome.ok and m.outcome.approval_id:
            _executed(c, m.outcome, m, touched)
    if m.checkpoint is not None:
        version = m.expected_version + 1
        c.execute(
            "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
            "updated_at = excluded.updated_at, status = excluded.status",
            (m.run_id, version, encode_json_form(m.checkpoint), m.now, str(m.checkpoint.get("status", ""))),
        )
    for entry in m.events:
        insert_audit(c, entry)
    created = False
    if m.ask is not None and asked is None:
        write_approval(c, m.ask, insert=True)
        insert_audit(c, audit_for_creation(m.ask))
        asked, created = m.ask, True
        touched.append(m.ask.id)
    claim: Claim | None = None
    refused: EngineError | None = None
    if m.claim is not None:
        try:
            claim = _claim(c, m.claim, m, touched)
        except (ClaimRefused, IllegalTransition) as exc:
            refused = exc
    if m.release:
        c.execute("DELETE FROM run_owners WHERE run_id = ? AND holder = ?", (m.run_id, m.holder))
    return Committed(applied=True, version=version, claim=claim, claim_refused=refused, approval=asked, created=created)


def _claim(c: sqlite3.Connection, intent: ClaimIntent, m: Commit, touched: list[str]) -> Claim:
    refuse_withdrawn(c, intent.receipt)  # the whole commit with it: nothing runs, or is recorded, by a withdrawn one
    out = claim_rules.next_claim(
        load_claim(c, intent.key),
        key=intent.key,
        action_hash=intent.action_hash,
        holder=m.holder,
        now=m.now,
        lease=m.lease,
        retry_failed=intent.retry_failed,
    )
    if intent.approval_id is None:
        if out.acquired:
            write_claim(c, out, receipt=intent.receipt)
        return out
    a = load_approval(c, intent.approval_id)
    moves = claim_rules.claim_moves(out, a)  # refused before anything of the claim is written
    if out.acquired:
        write_claim(c, out, receipt=intent.receipt)
    for target in moves:
        a = _move(c, a, target, m, touched)
    return out


def _executed(c: sqlite3.Connection, o: OutcomeRecord, m: Commit, touched: list[str]) -> None:
    assert o.approval_id is not None
    a = load_approval(c, o.approval_id)
    for target in claim_rules.steps_to_executed(a.status):  # done without being seen running: through executing
        a = _move(c, a, target, m, touched)


def _move(c: sqlite3.Connection, a: Approval, target: Status, m: Commit, touched: list[str]) -> Approval:
    updated = claim_rules.transitioned(a, target=target, expected_version=a.version, now=m.now, reason=None)
    write_approval(c, updated)
    insert_audit(c, audit_for_decision(updated, actor=m.holder, event=str(target), now=m.now))
    touched.append(a.id)
    return updated
