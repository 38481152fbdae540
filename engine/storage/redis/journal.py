"""A run's step boundaries in Redis: each :class:`Commit` is one script (``commit.lua``), and
opening a run to resume it another (``open.lua``)."""

from __future__ import annotations

import json
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.ids import id_collision
from hitl.engine.domain.journal import ClaimIntent, Commit, Committed, Opened
from hitl.engine.domain.models import Approval
from hitl.engine.domain.ranking import due_soon_at, rank_key
from hitl.engine.domain.records import Claim, ClaimState
from hitl.engine.errors import EngineError, IllegalTransition, NotFound
from hitl.engine.receipts.claims import withdrawn_refusal
from hitl.engine.storage.codec import audit_for_creation, encode_json_form
from hitl.engine.storage.redis.codec import approval_from_result, approval_to_fields, entry_body, static_doc, text
from hitl.engine.storage.redis.connection import ANY_ROLE, RedisConnection
from hitl.engine.storage.redis.part import RedisPart
from hitl.engine.storage.redis.receipts import receipt_record

__all__ = ["RedisJournal"]


class RedisJournal(RedisPart):
    """:class:`hitl.engine.ports.Journal` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__(conn)
        self._none = f"{conn.p}:unused"  # stands in for the keys a commit does not touch (never written)

    async def commit(self, commit: Commit) -> Committed:
        c = self.conn
        keys = [
            c.run_key(commit.run_id),
            c.running_key,
            c.paused_key,
            c.events_key,
            *self._claim_keys(commit.outcome.key if commit.outcome else None),
            *self._approval_keys(commit.outcome.approval_id if commit.outcome else None),
            *self._claim_keys(commit.claim.key if commit.claim else None),
            *self._approval_keys(commit.claim.approval_id if commit.claim else None),
            *self._approval_keys(commit.ask.id if commit.ask else None),
            c.pending_key(commit.ask.required_role) if commit.ask else self._none,
            f"{c.p}:due",
            c.all_key,
            f"{c.p}:pending-roles",
            c.ended_key,
            c.finished_claims_key,
            c.ranked_key(commit.ask.required_role) if commit.ask else self._none,
            c.receipt_key(commit.claim.receipt.jti) if commit.claim and commit.claim.receipt else self._none,
            *self._issued_keys(commit.claim),
        ]
        # The plan holds strings (records already encoded), booleans and None: JSON as it is, orjson's to encode.
        out = [text(x) for x in await c.call(c.commit_script, keys, [encode_json_form(self._plan(commit))])]
        tag = out[0]
        if tag == "not_owner":
            raise claim_rules.not_owner(commit.run_id, out[1] or None)
        if tag == "stale":
            raise claim_rules.stale_run(commit.run_id, int(out[1]), commit.expected_version)
        if tag == "withdrawn":
            assert commit.claim is not None and commit.claim.receipt is not None
            assert commit.claim.receipt.audit is not None and commit.claim.receipt.audit.approval_id
            raise withdrawn_refusal(commit.claim.receipt.audit.approval_id)
        if tag == "fenced":
            assert commit.outcome is not None
            raise claim_rules.claim_fenced(commit.outcome.key, commit.holder, commit.outcome.attempt)
        if tag == "collision":
            assert commit.ask is not None
            raise id_collision(commit.ask.id, out[1])
        if tag == "decided":
            return Committed(applied=False, version=int(out[1]), approval=approval_from_result(out))
        version, asked, rest = int(out[1]), out[2], out[3:]
        approval: Approval | None = commit.ask if asked == "created" else None
        if asked == "existing":  # the same action asked before and still pending: the run pauses on it
            approval, rest = approval_from_result(rest[:10]), rest[10:]
        claim, refused = self._claim_answer(commit, rest)
        return Committed(
            applied=True,
            version=version,
            claim=claim,
            claim_refused=refused,
            approval=approval,
            created=asked == "created",
        )

    def _issued_keys(self, claim: ClaimIntent | None) -> list[str]:
        """The receipt's approval's receipts state and audit chain, when the claim issues an approved action's."""
        issued = claim.receipt.audit if claim is not None and claim.receipt is not None else None
        if issued is None or not issued.approval_id:
            return [self._none, self._none]
        return [self.conn.receipt_approval_key(issued.approval_id), self.conn.audit_key(issued.approval_id)]

    def _plan(self, m: Commit) -> dict[str, Any]:
        c = self.conn
        plan: dict[str, Any] = {
            "run_id": m.run_id,
            "holder": m.holder,
            "now": repr(m.now),
            "lease_until": repr(m.now + m.lease),
            "own": m.own,
            "release": m.release,
            "events": [entry_body(e) for e in m.events],
            "cp": None,
            "outcome": None,
            "ask": None,
            "claim": None,
        }
        if m.checkpoint is not None:
            cp = encode_json_form(m.checkpoint)
            plan["cp"] = {"expected": m.expected_version, "data": cp, "status": str(m.checkpoint.get("status", ""))}
        if m.outcome is not None:
            o = m.outcome
            plan["outcome"] = {
                "key": o.key,
                "attempt": str(o.attempt),
                "state": str(ClaimState.SUCCEEDED if o.ok else ClaimState.FAILED),
                "result": json.dumps(o.result),
                "approval": o.approval_id or "",
                "channel": c.channel(o.approval_id) if o.approval_id else "",
            }
        if m.ask is not None:
            a = m.ask
            fields: list[str] = []
            for k, v in approval_to_fields(a).items():
                fields += [k, v]
            plan["ask"] = {
                "id": a.id,
                "dedupe": a.dedupe_key,
                "audit": entry_body(audit_for_creation(a)),
                "doc": static_doc(a),
                "fields": fields,
                "role": a.required_role or ANY_ROLE,
                "created_at": repr(a.created_at),
                "expires_at": repr(a.expires_at),
                "rank": str(rank_key(a)),
                "soon": repr(due_soon_at(a)),
            }
        if m.claim is not None:
            ci = m.claim
            plan["claim"] = {
                "hash": ci.action_hash,
                "retry_failed": "1" if ci.retry_failed else "0",
                "approval": ci.approval_id or "",
                "channel": c.channel(ci.approval_id) if ci.approval_id else "",
                "receipt": None,
                "issued": None,
            }
            if ci.receipt is not None:
                plan["claim"]["receipt"] = receipt_record(ci.receipt, now=m.now)
                if ci.receipt.audit is not None and ci.receipt.audit.approval_id:
                    plan["claim"]["issued"] = entry_body(ci.receipt.audit)
        return plan

    def _claim_answer(self, m: Commit, out: list[str]) -> tuple[Claim | None, EngineError | None]:
        if m.claim is None or not out or out[0] == "none":
            return None, None
        key, tag = m.claim.key, out[0]
        lease_until = m.now + m.lease
        if tag == "acquired":
            claim = Claim(
                key=key,
                action_hash=m.claim.action_hash,
                holder=m.holder,
                attempt=int(out[1]),
                state=ClaimState.RUNNING,
                lease_until=lease_until,
                acquired=True,
                recovered=out[2] == "1",
            )
            return claim, None
        if tag == "hash_mismatch":
            return None, claim_rules.claim_hash_mismatch(key, out[1], m.claim.action_hash)
        if tag == "in_progress":
            return None, claim_rules.claim_in_progress(key, out[1], int(out[2]))
        if tag == "not_approved":
            aid = m.claim.approval_id
            return None, IllegalTransition(
                f"{aid} is {out[1]}, not approved; the effect does not run", approval_id=aid, current=out[1]
            )
        done = Claim(
            key=key,
            action_hash=m.claim.action_hash,
            holder=out[1],
            attempt=int(out[2]),
            state=ClaimState(out[3]),
            lease_until=float(out[4]),
            result=json.loads(out[5]) if out[5] else None,
        )
        return done, None

    async def open(self, run_id: str, *, holder: str, now: float, lease: float) -> Opened:
        c = self.conn
        keys = [c.run_key(run_id), c.running_key, c.trust_key(run_id)]
        args = [run_id, holder, repr(now), repr(now + lease), f"{c.p}:{{"]
        out = [text(x) for x in await c.call(c.open_script, keys, args)]
        if out[0] == "missing":
            raise NotFound.run(run_id)
        if out[0] == "not_owner":
            raise claim_rules.not_owner(run_id, out[1])
        fields = json.loads(out[3])  # cjson encodes an empty table as {}
        waiting = approval_from_result(out[4:]) if len(out) > 4 else None
        grants = [json.loads(f) for f in fields] if isinstance(fields, list) else []
        return Opened(
            data=json.loads(out[1]),
            version=int(out[2]),
            waiting=waiting,
            grants=frozenset((str(r), str(t)) for r, t in grants),
        )

    def _claim_keys(self, key: str | None) -> list[str]:
        return [self.conn.claim_key(key) if key is not None else self._none]

    def _approval_keys(self, approval_id: str | None) -> list[str]:
        return self.conn.approval_keys(approval_id) if approval_id is not None else [self._none] * 3
