"""Execution claims in Redis: one Lua script per claim and per outcome."""

from __future__ import annotations

import json
from typing import Any

from hitl.engine.domain.execution import claim_fenced, claim_hash_mismatch, claim_in_progress
from hitl.engine.domain.records import Claim, ClaimState
from hitl.engine.receipts.claims import Issued, withdrawn_refusal
from hitl.engine.storage.redis.codec import entry_body, text
from hitl.engine.storage.redis.part import RedisPart
from hitl.engine.storage.redis.receipts import receipt_record

__all__ = ["RedisLedger"]


class RedisLedger(RedisPart):
    """:class:`hitl.engine.ports.ExecutionLedger` on Redis."""

    def _key(self, key: str) -> str:
        return self.conn.claim_key(key)

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
        args = [action_hash, holder, repr(now), repr(now + lease), "1" if retry_failed else "0"]
        keys = [self._key(key)]
        approval = receipt.audit.approval_id if receipt is not None and receipt.audit is not None else None
        if receipt is not None:
            keys.append(self.conn.receipt_key(receipt.jti))
            args += receipt_record(receipt, now=now)
            if receipt.audit is not None and approval:
                keys += [self.conn.receipt_approval_key(approval), self.conn.audit_key(approval)]
                args.append(entry_body(receipt.audit))
        out = [text(x) for x in await self.conn.call(self.conn.claim_script, keys, args)]
        if out[0] == "withdrawn" and approval:
            raise withdrawn_refusal(approval)
        if out[0] == "acquired":
            return Claim(
                key=key,
                action_hash=action_hash,
                holder=holder,
                attempt=int(out[1]),
                state=ClaimState.RUNNING,
                lease_until=now + lease,
                acquired=True,
                recovered=out[2] == "1",
            )
        if out[0] == "hash_mismatch":
            raise claim_hash_mismatch(key, out[1], action_hash)
        if out[0] == "in_progress":
            raise claim_in_progress(key, out[1], int(out[2]))
        return Claim(
            key=key,
            action_hash=action_hash,
            holder=out[1],
            attempt=int(out[2]),
            state=ClaimState(out[3]),
            lease_until=float(out[4]),
            result=json.loads(out[5]) if out[5] else None,
        )

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        state = ClaimState.SUCCEEDED if ok else ClaimState.FAILED
        args = [holder, str(attempt), str(state), json.dumps(result), repr(now), key]
        keys = [self._key(key), self.conn.finished_claims_key]
        out = [text(x) for x in await self.conn.call(self.conn.finish_script, keys, args)]
        if out[0] != "ok":
            raise claim_fenced(key, holder, attempt)
        return Claim(
            key=key,
            action_hash=out[1],
            holder=holder,
            attempt=attempt,
            state=state,
            lease_until=float(out[2]),
            result=result,
        )

    async def renew(self, key: str, *, holder: str, attempt: int, now: float, lease: float) -> bool:
        args = [holder, str(attempt), repr(now + lease)]
        out = await self.conn.call(self.conn.renew_script, [self._key(key)], args)
        return text(out[0]) == "1"

    async def get(self, key: str) -> Claim | None:
        f = {text(k): text(v) for k, v in (await self.conn.r.hgetall(self._key(key))).items()}
        if not f:
            return None
        return Claim(
            key=key,
            action_hash=f["action_hash"],
            holder=f["holder"],
            attempt=int(f["attempt"]),
            state=ClaimState(f["state"]),
            lease_until=float(f["lease_until"]),
            result=json.loads(f["result"]) if f.get("result") else None,
        )
