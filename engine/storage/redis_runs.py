"""Runs in Redis: execution claims, checkpoints, the paused-runs index and durable jobs."""

from __future__ import annotations

import json
from typing import Any, cast

from redis.exceptions import RedisError

from engine.domain.execution import claim_fenced, claim_hash_mismatch, claim_in_progress, stale_run
from engine.domain.records import Claim, ClaimState, Job
from engine.errors import (
    StoreError,
)
from engine.storage.redis_base import RedisBase
from engine.storage.redis_codec import _s

__all__ = ["RedisRuns"]


class RedisRuns(RedisBase):
    # -- execution claims -------------------------------------------------------------------------------
    def _ck(self, key: str) -> str:
        return f"{self.p}:claim:{{{key}}}"

    async def claim(
        self, key: str, *, action_hash: str, holder: str, now: float, lease: float, retry_failed: bool = False
    ) -> Claim:
        out = [
            _s(x)
            for x in await self._call(
                self._claim,
                [self._ck(key)],
                [action_hash, holder, repr(now), repr(now + lease), "1" if retry_failed else "0"],
            )
        ]
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
        out = [
            _s(x)
            for x in await self._call(
                self._finish, [self._ck(key)], [holder, str(attempt), str(state), json.dumps(result)]
            )
        ]
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

    async def get_claim(self, key: str) -> Claim | None:
        f = {_s(k): _s(v) for k, v in (await self.r.hgetall(self._ck(key))).items()}
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

    # -- checkpoints ------------------------------------------------------------------------------------
    async def save_checkpoint(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        status = str(data.get("status", ""))
        keys = [f"{self.p}:run:{{{run_id}}}"]
        out = [
            _s(x)
            for x in await self._call(self._checkpoint, keys, [expected_version, json.dumps(data), repr(now), status])
        ]
        if out[0] != "ok":
            raise stale_run(run_id, int(out[1]), expected_version)
        # The paused-runs index changes only when a run pauses or continues: one more round trip then, not
        # on every step. It is read with verification, so a crash in between leaves nothing unrecoverable.
        was, now_paused = out[2] == "paused", status == "paused"
        if now_paused and not was:
            await self.r.zadd(f"{self.p}:paused-runs", {run_id: now})
        elif was and not now_paused:
            await self.r.zrem(f"{self.p}:paused-runs", run_id)
        return int(out[1])

    async def paused_runs(self, *, limit: int = 500) -> list[str]:
        return [_s(x) for x in await self.r.zrange(f"{self.p}:paused-runs", 0, limit - 1)]

    async def load_checkpoint(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        data, version = await self.r.hmget(f"{self.p}:run:{{{run_id}}}", ["data", "version"])
        return (json.loads(data), int(_s(version))) if data is not None else None

    # -- jobs: a stream per kind with a consumer group; a crashed consumer's jobs are reclaimed (XAUTOCLAIM) ----
    _GROUP = "hitl-workers"

    def _jk(self, kind: str) -> str:
        return f"{self.p}:jobs:{kind}"

    async def enqueue_job(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        job_id = await self.r.xadd(self._jk(kind), {"payload": json.dumps(payload), "at": repr(now)})
        return f"{kind}/{_s(job_id)}"

    async def claim_jobs(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        key = self._jk(kind)
        try:
            await self.r.xgroup_create(key, self._GROUP, id="0", mkstream=True)
        except RedisError as exc:
            if "BUSYGROUP" not in str(exc):
                raise StoreError(f"Redis store failed: {exc}") from exc
        # Idle time is the server's clock: ``lease`` is how long a consumer may hold a job unacknowledged.
        reclaimed = await self.r.xautoclaim(
            key, self._GROUP, consumer, min_idle_time=int(lease * 1000), start_id="0-0", count=limit
        )
        entries = list(reclaimed[1]) if reclaimed else []
        if len(entries) < limit:
            fresh = cast(
                list[Any], await self.r.xreadgroup(self._GROUP, consumer, {key: ">"}, count=limit - len(entries))
            )
            for _stream, items in fresh or []:
                entries += list(items)
        jobs = []
        for job_id, fields in entries:
            if not fields:  # deleted while pending
                continue
            f = {_s(k): _s(v) for k, v in fields.items()}
            jobs.append(Job(id=f"{kind}/{_s(job_id)}", kind=kind, payload=json.loads(f["payload"])))
        return jobs

    async def ack_job(self, job_id: str) -> None:
        kind, _, xid = job_id.partition("/")
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.xack(self._jk(kind), self._GROUP, xid)
            pipe.xdel(self._jk(kind), xid)
            await pipe.execute()
