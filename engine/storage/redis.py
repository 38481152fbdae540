"""Redis store: the shared production store for several bot replicas.

Each decision is one ``EVALSHA`` (one round trip). Per-approval keys share a hash tag
(``{prefix}:{apr_x}`` and ``{prefix}:{apr_x}:audit``) so a Redis Cluster can hold them; the scripts only
touch keys of one slot. Secondary indexes (pending by role, due-for-expiry) are sorted sets written
*before* the approval in the same pipeline and repaired lazily on read, so an index entry can be
stale but an approval can never be missing from its index.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection
from importlib import resources
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisError

from engine.domain.decide import DecideCommand, refusal_message
from engine.domain.models import Approval, Status
from engine.domain.policy import WindowStats
from engine.domain.records import AuditEntry, Claim, ClaimState, Job, MessageRef, Page, TrustGrant
from engine.domain.states import sources_of
from engine.errors import (
    ClaimRefused,
    DecisionRefused,
    EngineError,
    ErrorCode,
    IllegalTransition,
    NotFound,
    StoreError,
)
from engine.storage._codec import decode_cursor, encode_cursor
from engine.storage.redis_codec import approval_from_result, approval_to_fields, static_doc

__all__ = ["RedisStore", "connect"]

_ANY_ROLE = "*"
_DYNAMIC_FIELDS = ["status", "version", "decisions", "reason", "approved_args", "superseded_by", "updated_at"]


def connect(url: str, *, max_connections: int = 64, socket_timeout: float = 5.0) -> Redis:
    """A client whose pool makes callers wait for a free connection instead of failing under load.

    Waiting for a pooled connection has no deadline of its own (each command still times out after
    ``socket_timeout``), which also keeps a timer off the hot path.
    """
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=None, socket_timeout=socket_timeout, decode_responses=True
    )
    return Redis.from_pool(pool)  # the client owns the pool and closes it in aclose()


def _lua(name: str) -> str:
    return resources.files("engine.storage").joinpath(f"lua/{name}.lua").read_text(encoding="utf-8")


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class RedisStore:
    """Redis implementation of :class:`engine.ports.Store`.

    Args:
        client: an injected ``redis.asyncio.Redis`` (the caller owns pooling and TLS settings).
        prefix: key prefix, so several deployments or tests share one server.
    """

    def __init__(self, client: Redis, *, prefix: str = "hitl") -> None:
        self.r = client
        self.p = prefix
        self._decide: AsyncScript = client.register_script(_lua("decide"))
        self._transition: AsyncScript = client.register_script(_lua("transition"))
        self._create: AsyncScript = client.register_script(_lua("create"))
        self._claim: AsyncScript = client.register_script(_lua("claim"))
        self._finish: AsyncScript = client.register_script(_lua("finish"))
        self._window: AsyncScript = client.register_script(_lua("window"))
        self._checkpoint: AsyncScript = client.register_script(_lua("checkpoint"))

    # -- keys -------------------------------------------------------------------------------------------
    def _k(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}"

    def _ak(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}:audit"

    def _dk(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}:doc"

    def _keys(self, approval_id: str) -> list[str]:
        return [self._k(approval_id), self._ak(approval_id), self._dk(approval_id)]

    def _pending(self, role: str | None) -> str:
        return f"{self.p}:pending:{role or _ANY_ROLE}"

    async def _call(self, script: AsyncScript, keys: list[str], args: list[Any]) -> list[Any]:
        # EVALSHA directly: one round trip, and cheaper than redis-py's Script wrapper on the hot path.
        try:
            try:
                out = await self.r.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self.r.script_load(script.script)
                out = await self.r.evalsha(script.sha, len(keys), *keys, *args)
        except RedisError as exc:
            raise StoreError(f"Redis store failed: {exc}; nothing was applied") from exc
        return list(out)

    async def _pipeline(self, build: Callable[[Pipeline], None], scripts: list[AsyncScript]) -> list[Any]:
        """One round trip; loads the scripts once if the server lost them (restart, SCRIPT FLUSH)."""
        for attempt in (1, 2):
            try:
                async with self.r.pipeline(transaction=False) as pipe:
                    build(pipe)
                    return list(await pipe.execute())
            except NoScriptError:
                if attempt == 2:
                    raise
                for script in scripts:
                    await self.r.script_load(script.script)
            except RedisError as exc:
                raise StoreError(f"Redis store failed: {exc}; nothing was applied") from exc
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.r.aclose()

    # -- approvals --------------------------------------------------------------------------------------
    async def create_approval(self, approval: Approval) -> tuple[Approval, bool]:
        fields = approval_to_fields(approval)
        entry = AuditEntry(
            at=approval.created_at,
            actor=approval.requester,
            event="created",
            approval_id=approval.id,
            version=approval.version,
            action_hash=approval.action_hash,
            detail=f"{approval.tool} {approval.tier}",
        )
        args: list[Any] = [entry.model_dump_json(), static_doc(approval)]
        for k, v in fields.items():
            args += [k, v]

        def build(pipe: Pipeline) -> None:
            # Indexes first: a crash between the two leaves a dangling index entry (repaired on read),
            # never an approval that no index knows about.
            pipe.zadd(self._pending(approval.required_role), {approval.id: approval.created_at}, nx=True)
            pipe.zadd(f"{self.p}:due", {approval.id: approval.expires_at}, nx=True)
            pipe.zadd(f"{self.p}:all", {approval.id: approval.created_at}, nx=True)
            pipe.sadd(f"{self.p}:pending-roles", approval.required_role or _ANY_ROLE)
            pipe.evalsha(self._create.sha, 3, *self._keys(approval.id), *args)

        out = await self._pipeline(build, [self._create])
        res = list(out[-1])
        if _s(res[0]) == "created":
            return approval, True
        return approval_from_result(res), False

    async def get_approval(self, approval_id: str) -> Approval:
        found = (await self._fetch([approval_id]))[0]
        if found is None:
            raise NotFound(f"no approval {approval_id!r}; list open ones with `hitl pending`", approval_id=approval_id)
        return found

    async def _fetch(self, ids: list[str]) -> list[Approval | None]:
        try:
            async with self.r.pipeline(transaction=False) as pipe:
                for aid in ids:
                    pipe.get(self._dk(aid))
                    pipe.hmget(self._k(aid), _DYNAMIC_FIELDS)
                rows = await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"Redis store failed: {exc}") from exc
        out: list[Approval | None] = []
        for i in range(0, len(rows), 2):
            doc, dyn = rows[i], rows[i + 1]
            out.append(None if doc is None or dyn[0] is None else approval_from_result(["", "", doc, *dyn]))
        return out

    async def list_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        after = decode_cursor(cursor)
        if roles is None:  # every role that ever had a pending approval (a small set; no keyspace scan)
            index_keys = [
                self._pending(None if r == _ANY_ROLE else r)
                for r in sorted(_s(x) for x in await self.r.smembers(f"{self.p}:pending-roles"))
            ]
        else:
            index_keys = [self._pending(None)] + [self._pending(r) for r in roles]
        items: list[tuple[float, str, Approval]] = []
        seen: set[str] = set()
        for key in index_keys:
            items += await self._scan_index(_s(key), after, limit + 1, exclude_requester, seen)
        items.sort(key=lambda t: (t[0], t[1]))
        page = items[:limit]
        nxt = encode_cursor(page[-1][0], page[-1][1]) if len(items) > limit else None
        return Page(items=[a for _, _, a in page], cursor=nxt)

    async def _scan_index(
        self, key: str, after: tuple[float, str] | None, want: int, exclude: str | None, seen: set[str]
    ) -> list[tuple[float, str, Approval]]:
        out: list[tuple[float, str, Approval]] = []
        lo: float | str = after[0] if after else "-inf"
        offset = 0
        while len(out) < want:
            batch = cast(
                list[tuple[Any, float]],
                await self.r.zrangebyscore(key, lo, "+inf", start=offset, num=want * 2, withscores=True),
            )
            if not batch:
                break
            offset += len(batch)
            ids = [(_s(m), float(sc)) for m, sc in batch]
            ids = [(m, sc) for m, sc in ids if after is None or (sc, m) > after]
            rows = await self._fetch([m for m, _ in ids])
            stale: list[str] = []
            for (m, sc), a in zip(ids, rows, strict=True):
                if a is None:
                    continue  # created index-first and not (yet) written, or removed: skip
                if a.status is not Status.PENDING:
                    stale.append(m)
                elif a.requester != exclude and m not in seen:
                    seen.add(m)
                    out.append((sc, m, a))
            if stale:
                await self.r.zrem(key, *stale)
                offset -= len(stale)
        return out

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        decision = {
            "reviewer": cmd.reviewer.id,
            "kind": str(cmd.kind),
            "at": now,
            "version": cmd.expected_version,
            "reason": cmd.reason,
            "args": cmd.args,
            "via": cmd.via,
        }
        packed = [
            repr(now),
            str(cmd.expected_version),
            cmd.expected_hash,
            cmd.reviewer.id,
            str(cmd.kind),
            json.dumps(decision, separators=(",", ":"), ensure_ascii=False),
            cmd.reason or "",
            json.dumps(cmd.args) if cmd.args is not None else "",
            cmd.supersede_with or "",
            cmd.via,
            cmd.approval_id,
            *sorted(cmd.reviewer.roles),
        ]
        args = [json.dumps(packed, ensure_ascii=False), self.channel(cmd.approval_id)]
        out = await self._call(self._decide, self._keys(cmd.approval_id), args)
        tag = _s(out[0])
        if tag == "missing":
            raise NotFound(
                f"no approval {cmd.approval_id!r}; list open ones with `hitl pending`",
                approval_id=cmd.approval_id,
            )
        approval = approval_from_result(out)
        if tag == "ok":
            return approval
        code = ErrorCode(_s(out[1]))
        winner = None
        if code is ErrorCode.ALREADY_DECIDED:
            winner = approval.decisions[-1].reviewer if approval.decisions else "the system"
        raise DecisionRefused(
            refusal_message(code, approval, cmd.reviewer.id),
            code=code,
            approval_id=approval.id,
            status=str(approval.status),
            version=approval.version,
            winner=winner,
        )

    def channel(self, approval_id: str) -> str:
        """Pub/sub channel on which the scripts announce every change of ``approval_id``."""
        return f"{self.p}:ev:{approval_id}"

    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pubsub = self.r.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel(approval_id))
            while True:
                # Read after subscribing, so a change between the two cannot be missed.
                current = await self.get_approval(approval_id)
                left = deadline - loop.time()
                if current.version > after_version or left <= 0:
                    return current
                await pubsub.get_message(timeout=left)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        due = [_s(m) for m in await self.r.zrangebyscore(f"{self.p}:due", "-inf", now, start=0, num=limit)]
        if not due:
            return []

        def build(pipe: Pipeline) -> None:
            for aid in due:
                pipe.evalsha(
                    self._transition.sha,
                    3,
                    *self._keys(aid),
                    *[
                        repr(now),
                        "expired",
                        "",
                        "system",
                        "expired without a decision",
                        aid,
                        "",
                        self.channel(aid),
                        "pending",
                    ],
                )

        results = await self._pipeline(build, [self._transition])
        expired = [approval_from_result(list(r)) for r in results if _s(r[0]) == "ok"]
        await self.r.zrem(f"{self.p}:due", *due)  # decided, expired or missing: none is due any more
        return expired

    async def transition(
        self,
        approval_id: str,
        *,
        target: Status,
        expected_version: int | None,
        actor: str,
        now: float,
        reason: str | None = None,
    ) -> Approval:
        args = [
            repr(now),
            str(target),
            "" if expected_version is None else expected_version,
            actor,
            reason or "",
            approval_id,
            reason or "",
            self.channel(approval_id),
            *sorted(str(s) for s in sources_of(target)),
        ]
        out = await self._call(self._transition, self._keys(approval_id), args)
        tag = _s(out[0])
        if tag == "missing":
            raise NotFound(f"no approval {approval_id!r}", approval_id=approval_id)
        if tag == "stale":
            raise EngineError(
                f"{approval_id} changed (version {_s(out[2])}, expected {expected_version}); reload",
                code=ErrorCode.STALE_VERSION,
                approval_id=approval_id,
                version=int(_s(out[2])),
            )
        if tag == "illegal":
            raise IllegalTransition(
                f"approval {approval_id} cannot move from {_s(out[1])} to {target}",
                approval_id=approval_id,
                current=_s(out[1]),
                target=str(target),
            )
        return approval_from_result(out)

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
            raise ClaimRefused(
                f"idempotency key {key!r} was used for a different action; use a new key for a new action",
                code=ErrorCode.CLAIM_HASH_MISMATCH,
                key=key,
                recorded_hash=out[1],
                action_hash=action_hash,
            )
        if out[0] == "in_progress":
            raise ClaimRefused(
                f"{key!r} is being executed by {out[1]} (attempt {out[2]}); wait for its outcome",
                code=ErrorCode.CLAIM_IN_PROGRESS,
                key=key,
                holder=out[1],
                attempt=int(out[2]),
            )
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
            raise ClaimRefused(
                f"{holder} no longer holds {key!r} (attempt {attempt}); its outcome was not recorded",
                code=ErrorCode.CLAIM_FENCED,
                key=key,
                holder=holder,
                attempt=attempt,
            )
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
            raise EngineError(
                f"run {run_id} was saved by another process (version {out[1]}, expected "
                f"{expected_version}); it is being resumed elsewhere",
                code=ErrorCode.STALE_VERSION,
                run_id=run_id,
                version=int(out[1]),
            )
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

    # -- trust ------------------------------------------------------------------------------------------
    def _tk(self, session_id: str) -> str:
        return f"{self.p}:trust:{{{session_id}}}"

    async def grant_trust(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self._tk(session_id), tool, json.dumps([until, by]))
            pipe.sadd(f"{self.p}:trust-sessions", session_id)
            pipe.xadd(
                f"{self.p}:audit",
                {
                    "e": AuditEntry(
                        at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}"
                    ).model_dump_json()
                },
            )
            await pipe.execute()

    async def list_trust(self, session_id: str, *, now: float) -> list[TrustGrant]:
        raw = await self.r.hgetall(self._tk(session_id))
        out = []
        for tool, val in raw.items():
            until, by = json.loads(val)
            if until > now:
                out.append(TrustGrant(session_id=session_id, tool=_s(tool), granted_by=by, until=until))
        return sorted(out, key=lambda g: g.tool)

    async def list_all_trust(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        out: list[TrustGrant] = []
        for session_id in sorted(_s(x) for x in await self.r.smembers(f"{self.p}:trust-sessions")):
            grants = await self.list_trust(session_id, now=now)
            if not grants:
                await self.r.srem(f"{self.p}:trust-sessions", session_id)
            out += grants
            if len(out) >= limit:
                break
        return out[:limit]

    async def revoke_trust(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        grants = {g.tool for g in await self.list_trust(session_id, now=now)}
        removed = bool(await self.r.hdel(self._tk(session_id), tool)) and tool in grants
        if removed:
            await self.append_audit(
                AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}")
            )
        return removed

    # -- rolling windows --------------------------------------------------------------------------------
    async def window_add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        out = await self._call(
            self._window,
            [f"{self.p}:win:{{{key}}}"],
            [repr(now), repr(now - window), f"{event_id}|{amount!r}", int(window) + 1, event_id],
        )
        return WindowStats(count=int(_s(out[0])), total=float(_s(out[1])))

    async def window_stats(self, key: str, *, now: float, window: float) -> WindowStats:
        out = await self._call(self._window, [f"{self.p}:win:{{{key}}}"], [repr(now), repr(now - window), "", 0, ""])
        return WindowStats(count=int(_s(out[0])), total=float(_s(out[1])))

    # -- audit and messages -----------------------------------------------------------------------------
    async def append_audit(self, entry: AuditEntry) -> None:
        if entry.approval_id:
            await self.r.rpush(self._ak(entry.approval_id), entry.model_dump_json())
        else:
            await self.r.xadd(f"{self.p}:audit", {"e": entry.model_dump_json()})

    async def audit(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        if approval_id:
            rows = await self.r.lrange(self._ak(approval_id), 0, limit - 1)
            return [AuditEntry.model_validate_json(r).model_copy(update={"seq": i + 1}) for i, r in enumerate(rows)]
        # The global view merges the newest approvals' logs with session-level events.
        ids = [_s(m) for m in await self.r.zrevrange(f"{self.p}:all", 0, limit - 1)]
        async with self.r.pipeline(transaction=False) as pipe:
            for aid in ids:
                pipe.lrange(self._ak(aid), 0, -1)
            pipe.xrevrange(f"{self.p}:audit", count=limit)
            *logs, stream = await pipe.execute()
        entries = [AuditEntry.model_validate_json(r) for log in logs for r in log]
        entries += [AuditEntry.model_validate_json(fields[b"e" if b"e" in fields else "e"]) for _, fields in stream]
        entries.sort(key=lambda e: e.at)
        return entries[-limit:]

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

    async def set_message(self, approval_id: str, ref: MessageRef) -> None:
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.hset(f"{self.p}:{{{approval_id}}}:msg", mapping={"channel": ref.channel, "ts": ref.ts})
            pipe.set(f"{self.p}:msgref:{ref.channel}:{ref.ts}", approval_id)
            await pipe.execute()

    async def get_message(self, approval_id: str) -> MessageRef | None:
        f = {_s(k): _s(v) for k, v in (await self.r.hgetall(f"{self.p}:{{{approval_id}}}:msg")).items()}
        return MessageRef(channel=f["channel"], ts=f["ts"]) if f else None

    async def approval_for_message(self, ref: MessageRef) -> str | None:
        v = await self.r.get(f"{self.p}:msgref:{ref.channel}:{ref.ts}")
        return _s(v) if v is not None else None
