"""What every part of the Redis store shares: the client, the key layout, the Lua scripts, one-round-trip
calls, and the error boundary (a client failure is always a :class:`StoreError`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import unquote

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisError

from hitl.engine.errors import StoreError
from hitl.engine.storage.redis.calls import ScriptCalls

__all__ = [
    "ANY_ROLE",
    "DYNAMIC_FIELDS",
    "RedisConnection",
    "connect",
    "in_memory",
    "key_id",
    "key_part",
    "store_errors",
    "waits",
]

ANY_ROLE = "*"
DYNAMIC_FIELDS = ["status", "version", "decisions", "reason", "approved_args", "superseded_by", "updated_at"]
C = TypeVar("C", bound=type)


def connect(url: str, *, max_connections: int = 64, socket_timeout: float | None = None) -> Redis:
    """A client whose pool makes callers wait for a free connection (a burst queues instead of failing), with no
    per-command socket timeout: that makes redis-py wrap every read in a timer task, where the store bounds each
    whole operation once (:class:`RedisConnection`'s ``deadline``, one timer handle per operation). Measured in
    ``bench/redis_clients.py`` against a plain pool and against the old socket timeout.
    """
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=None, socket_timeout=socket_timeout, decode_responses=True
    )
    return Redis.from_pool(pool)  # the client owns the pool and closes it in aclose()


def _failed(exc: BaseException) -> StoreError:
    said = str(exc).strip().rstrip(".") or type(exc).__name__  # redis-py's messages end with a full stop
    return StoreError(f"Redis store failed: {said}; nothing was applied. Check that Redis is up, then retry")


def store_errors(cls: C) -> C:
    """Wrap every public coroutine method of ``cls`` so a Redis client failure surfaces as :class:`StoreError`
    (one boundary for the whole store, instead of a try/except per method that a new method could forget), and
    so the whole operation answers within the connection's ``deadline`` (methods that wait by design, marked
    :func:`waits`, bound themselves)."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(fn) or getattr(fn, "_hitl_in_memory", False):
            continue

        def wrap(method: Callable[..., Any], bounded: bool, reads_keys: bool) -> Callable[..., Any]:
            @functools.wraps(method)
            async def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
                deadline: float | None = self.conn.deadline if bounded else None
                try:
                    if reads_keys and not self.conn.laid_out:  # once per process: an older store is upgraded first
                        await self.conn.ready()
                    async with asyncio.timeout(deadline):
                        return await method(self, *args, **kwargs)
                except (RedisError, OSError) as exc:
                    raise _failed(exc) from exc
                except TimeoutError:
                    raise StoreError(
                        f"Redis did not answer within {deadline} s; nothing is known to be applied. Check that Redis "
                        "is up and not overloaded, then retry"
                    ) from None

            return guarded

        setattr(cls, name, wrap(fn, not getattr(fn, "_hitl_waits", False), name != "close"))
    return cls


F = TypeVar("F", bound=Callable[..., Any])


def waits(fn: F) -> F:
    """Mark a store method that waits by design (up to a timeout of its own): no operation deadline for it."""
    fn._hitl_waits = True  # type: ignore[attr-defined]
    return fn


def in_memory(fn: F) -> F:
    """Mark a store method that answers from this process's memory and reaches Redis only through the class's
    guarded methods: it needs no boundary of its own (a deadline costs a timer per call, on an allowed call's fast
    path)."""
    fn._hitl_in_memory = True  # type: ignore[attr-defined]
    return fn


def _lua(name: str) -> str:
    """A script's text, with each ``--#include <name>`` line replaced by that file (shared Lua functions)."""
    text = resources.files("hitl.engine.storage.redis").joinpath(f"lua/{name}.lua").read_text(encoding="utf-8")
    return re.sub(r"^--#include (\w+)$", lambda m: _lua(m.group(1)), text, flags=re.M)


_KEY_ESCAPES = str.maketrans({"%": "%25", ":": "%3A", "{": "%7B", "}": "%7D"})


def key_part(caller_id: str) -> str:
    """A caller-chosen id as one part of a key: ``%``, ``:``, ``{`` and ``}`` percent-encoded, so an id can neither
    add a part to the key (``:``) nor move it to another hash slot (``{}``)."""
    return caller_id.translate(_KEY_ESCAPES)


def key_id(part: str) -> str:
    """The caller's id a :func:`key_part` encodes (every ``%`` in a part starts one of its four escapes)."""
    return unquote(part)


LAYOUT = "5"
"""The key layout this release writes: the inbox's filter indexes (:mod:`.filters`) (4: pending approvals in the
due-soon index too; 3: in ranked indexes too; 2: caller ids inside keys through :func:`key_part`; 1 and none: as
the caller gave them)."""
KEYS_ENCODED = ("2", "3", "4", LAYOUT)
"""Layouts whose keys hold caller ids encoded already (never encoded again)."""
_UPGRADE_LEASE = 120
"""Seconds one process may hold the upgrade before another may take it over (it died midway)."""


class RedisConnection:
    """Client, key prefix and scripts."""

    def __init__(self, client: Redis, *, prefix: str = "hitl", deadline: float = 5.0) -> None:
        self.r = client
        self.p = prefix
        self.deadline = deadline
        """Seconds a store operation may take, all its round trips together, before it fails as a StoreError."""
        self.decide_script: AsyncScript = client.register_script(_lua("decide"))
        self.transition_script: AsyncScript = client.register_script(_lua("transition"))
        self.create_script: AsyncScript = client.register_script(_lua("create"))
        self.claim_script: AsyncScript = client.register_script(_lua("claim"))
        self.finish_script: AsyncScript = client.register_script(_lua("finish"))
        self.window_script: AsyncScript = client.register_script(_lua("window"))
        self.window_forget_script: AsyncScript = client.register_script(_lua("window_forget"))
        self.checkpoint_script: AsyncScript = client.register_script(_lua("checkpoint"))
        self.renew_script: AsyncScript = client.register_script(_lua("renew"))
        self.own_script: AsyncScript = client.register_script(_lua("own"))
        self.audit_script: AsyncScript = client.register_script(_lua("audit"))
        self.events_script: AsyncScript = client.register_script(_lua("events"))
        self.halt_script: AsyncScript = client.register_script(_lua("halt"))
        self.delegate_script: AsyncScript = client.register_script(_lua("delegate"))
        self.redeem_script: AsyncScript = client.register_script(_lua("redeem"))
        self.withdraw_script: AsyncScript = client.register_script(_lua("withdraw"))
        self.hold_script: AsyncScript = client.register_script(_lua("hold"))
        self.commit_script: AsyncScript = client.register_script(_lua("commit"))
        self.open_script: AsyncScript = client.register_script(_lua("open"))
        self.page_script: AsyncScript = client.register_script(_lua("page"))
        self.purge_script: AsyncScript = client.register_script(_lua("purge"))
        self.purge_audit_script: AsyncScript = client.register_script(_lua("purge_audit"))
        self.heads_script: AsyncScript = client.register_script(_lua("heads"))
        self.card_script: AsyncScript = client.register_script(_lua("card"))
        self.ack_script: AsyncScript = client.register_script(_lua("ack"))
        self.take_jobs_script: AsyncScript = client.register_script(_lua("take_jobs"))
        self.alert_save_script: AsyncScript = client.register_script(_lua("alert_save"))
        self.grants_ended_script: AsyncScript = client.register_script(_lua("grants_ended"))
        self._offset: float | None = None
        self.laid_out = False
        """Whether this store's keys are known to be in this release's layout (checked once per process)."""
        self.upgrade: Callable[[], Awaitable[None]] | None = None
        """Brings a store an older hitl wrote to this release's records and layout (the store sets it)."""
        self._readying = asyncio.Lock()
        pool = client.connection_pool
        self.scripts = ScriptCalls(pool, size=getattr(pool, "max_connections", None) or 64)
        """Connections of their own for the scripts every hot operation is (see :mod:`.calls`)."""

    async def ready(self, *, upgrade: bool = False) -> bool:
        """Make sure the keys are in this release's layout before the first operation, as SQLite and PostgreSQL
        migrate as they open: a new store is marked at once; a store an older hitl wrote is upgraded by one process
        (a lease key), while the others wait for the mark. ``upgrade``: run the upgrade even on a marked store
        (``hitl migrate``; every step of it is idempotent). Whether this call moved the store to this release's
        layout (False: it was there already, or another process moved it)."""
        async with self._readying:
            if self.laid_out and not upgrade:
                return False
            r = self.r
            try:
                marked = await r.get(self.layout_key) == LAYOUT
                if not marked and await r.exists(*self._written_keys) == 0:
                    # A new store: marked, with nothing to upgrade (so nothing moved, even for `hitl migrate`).
                    if await r.set(self.layout_key, LAYOUT, nx=True) or await r.get(self.layout_key) == LAYOUT:
                        self.laid_out = True
                        return False
                if marked and not upgrade:
                    self.laid_out = True
                    return False
                moved = await self._upgrade_once() and not marked
            except (RedisError, OSError) as exc:
                raise _failed(exc) from exc
            self.laid_out = True
            return moved

    async def _upgrade_once(self) -> bool:
        """Whether this process ran the upgrade (False: another finished it meanwhile)."""
        lease, started = f"{self.p}:upgrading", time.monotonic()
        while not await self.r.set(lease, "1", nx=True, ex=_UPGRADE_LEASE):
            if await self.r.get(self.layout_key) == LAYOUT:
                return False  # another process finished it
            if time.monotonic() - started > _UPGRADE_LEASE + 30:
                raise StoreError(
                    f"another process has been upgrading the Redis store for over {_UPGRADE_LEASE} s; "
                    f"check the processes using prefix {self.p!r}, then retry"
                )
            await asyncio.sleep(0.2)
        try:
            if self.upgrade is None:
                raise StoreError("this Redis store was written by an older hitl: run `hitl migrate`")
            await self.upgrade()
            await self.r.set(self.layout_key, LAYOUT)
        finally:
            await self.r.delete(lease)
        return True

    @property
    def _written_keys(self) -> list[str]:
        """Keys every store that ever held a record has one of (a store without any is new)."""
        return [
            self.all_key,
            self.running_key,
            self.paused_key,
            self.ended_key,
            self.finished_claims_key,
            self.alerts_key,
            self.trust_sessions_key,
            self.legacy_trust_sessions_key,
            self.halts_key,
            self.delegations_key,
            self.events_key,
            self.retention_indexed_key,
            self.chains_key,
            *(self.jobs_key(kind) for kind in ("resume", "webhook", "fyi", "card")),
        ]

    @property
    def layout_key(self) -> str:
        """Which key layout the store is in (:data:`LAYOUT`); absent in a store an older hitl wrote."""
        return f"{self.p}:layout"

    async def clock_offset(self) -> float:
        """Seconds the Redis server's clock is ahead of this process's wall clock, measured once (a ``TIME``
        round trip, its midpoint). A wall-clock deadline this process sets (``DecideCommand.answer_by``) is
        shifted by it before a script compares it with ``TIME``, so a skewed server clock neither refuses every
        decision nor lets a late one through."""
        if self._offset is None:
            try:
                sent = time.time()
                seconds, micros = await self.r.time()
                got = time.time()
            except (RedisError, OSError) as exc:
                raise _failed(exc) from exc
            self._offset = seconds + micros / 1e6 - (sent + got) / 2
        return self._offset

    # -- key layout -------------------------------------------------------------------------------------
    # Ids hitl makes (approval ids) go into keys as they are; ids a caller chooses go in through key_part.
    def approval_key(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}"

    def audit_key(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}:audit"

    def doc_key(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}:doc"

    def approval_keys(self, approval_id: str) -> list[str]:
        """The three keys of one approval, in the order the scripts take them."""
        return [self.approval_key(approval_id), self.audit_key(approval_id), self.doc_key(approval_id)]

    def run_key(self, run_id: str) -> str:
        """A run's hash: its checkpoint (data, version, status) and its owner (holder, lease_until)."""
        return f"{self.p}:run:{{{key_part(run_id)}}}"

    @property
    def running_key(self) -> str:
        """Runs by the deadline of their owner's lease (recovery finds orphans from it)."""
        return f"{self.p}:running-runs"

    @property
    def paused_key(self) -> str:
        """Ids of paused runs (one score: paged in id order)."""
        return f"{self.p}:paused-runs"

    @property
    def ended_key(self) -> str:
        """Runs that ended, by the time they ended (retention finds them from it)."""
        return f"{self.p}:ended-runs"

    @property
    def finished_claims_key(self) -> str:
        """Finished execution claims, by the time they finished (retention finds them from it)."""
        return f"{self.p}:finished-claims"

    @property
    def retention_indexed_key(self) -> str:
        """Set once the runs and claims written before the retention indexes existed were indexed."""
        return f"{self.p}:retention-indexed"

    @property
    def chains_key(self) -> str:
        """Audit chains whose approval retention removed, by the approval's last change (the audit retention
        removes them from here; verify and the audit view read them with :attr:`all_key`'s)."""
        return f"{self.p}:chains"

    def pending_key(self, role: str | None) -> str:
        return f"{self.p}:pending:{role or ANY_ROLE}"

    def ranked_key(self, role: str | None) -> str:
        """The pending approvals of ``role`` scored by their rank (:func:`~hitl.engine.domain.ranking.rank_key`)."""
        return f"{self.p}:ranked:{role or ANY_ROLE}"

    @property
    def soon_key(self) -> str:
        """The pending approvals of every role scored by when each becomes due soon
        (:func:`~hitl.engine.domain.ranking.due_soon_at`): the queue's "due soon" part."""
        return f"{self.p}:soon"

    @property
    def created_channel(self) -> str:
        """Pub/sub channel on which the scripts announce every new approval (its id)."""
        return f"{self.p}:created"

    def channel(self, approval_id: str) -> str:
        """Pub/sub channel on which the scripts announce every change of ``approval_id``."""
        return f"{self.p}:ev:{approval_id}"

    @property
    def all_key(self) -> str:
        """Every stored approval by creation time (the global audit view starts from it)."""
        return f"{self.p}:all"

    def message_key(self, approval_id: str) -> str:
        """Where an approval's card was posted (a hash: channel, ts)."""
        return f"{self.p}:{{{approval_id}}}:msg"

    def message_ref_key(self, channel: str, ts: str) -> str:
        """Which approval a posted card shows, as an older hitl wrote it (a string); read when the set is empty."""
        return f"{self.p}:msgref:{channel}:{ts}"

    def message_shown_key(self, channel: str, ts: str) -> str:
        """Which approvals a posted message shows (a sorted set: one for a card, each member for a group card)."""
        return f"{self.p}:msgshown:{channel}:{ts}"

    def trust_key(self, session_id: str) -> str:
        """A session's trust grants (a hash: ``[requester, tool]`` as JSON -> ``[until, by]``); the session, a
        caller's id, is encoded (:func:`key_part`) so it builds no key of another record."""
        return f"{self.p}:grants:{{{key_part(session_id)}}}"

    @property
    def trust_sessions_key(self) -> str:
        """Sessions that have (or had) trust grants."""
        return f"{self.p}:grant-sessions"

    def legacy_trust_key(self, session_id: str) -> str:
        """A session's grants as an older hitl wrote them (naming no requester): the upgrade removes them."""
        return f"{self.p}:trust:{{{session_id}}}"

    @property
    def legacy_trust_sessions_key(self) -> str:
        """The set of sessions an older hitl kept grants for (the upgrade removes it with them)."""
        return f"{self.p}:trust-sessions"

    @property
    def alerts_key(self) -> str:
        """Each alert's state (a hash: name -> ``{"version": n, "data": ...}``), apart from every run."""
        return f"{self.p}:alert-states"

    @property
    def delegations_key(self) -> str:
        """Every delegation, kept after it ends (a hash: id -> JSON)."""
        return f"{self.p}:delegations"

    @property
    def delegators_key(self) -> str:
        """Each delegator's latest delegation (a hash: delegator -> id): the one a new one must not overlap."""
        return f"{self.p}:delegators"

    @property
    def halts_key(self) -> str:
        """The stop switch's orders (a hash: scope -> order JSON)."""
        return f"{self.p}:halts"

    @property
    def holds_key(self) -> str:
        """Holds an outside service put on a kind of call (a hash: key -> until, epoch seconds)."""
        return f"{self.p}:call-holds"

    def claim_key(self, key: str) -> str:
        """An execution claim's hash (its key holds the caller's run and idempotency ids: encoded)."""
        return f"{self.p}:claim:{{{key_part(key)}}}"

    def receipt_key(self, jti: str) -> str:
        """A receipt's record (a hash: its claim's key, exp, whether and under which redemption id it was spent),
        expiring with it; the ``jti`` is encoded (a redeem names it)."""
        return f"{self.p}:receipt:{{{key_part(jti)}}}"

    def receipt_approval_key(self, approval_id: str) -> str:
        """Whether a receipt of an approval was spent first or it was withdrawn first (a hash: state, at), kept
        while the store is (a withdrawal outlives the receipts it refuses); the id comes from a receipt's ``sub``
        or a caller's path, so it is encoded."""
        return f"{self.p}:receipt-approval:{{{key_part(approval_id)}}}"

    def window_key(self, key: str) -> str:
        """A rolling window's sorted set (its key holds argument values: encoded)."""
        return f"{self.p}:win:{{{key_part(key)}}}"

    def window_priors_key(self, key: str) -> str:
        """A rolling window's events' prior stats, as each found them when first counted (the window's slot)."""
        return f"{self.p}:winprior:{{{key_part(key)}}}"

    def jobs_key(self, kind: str) -> str:
        """The stream of durable jobs of one kind."""
        return f"{self.p}:jobs:{kind}"

    def head_key(self, chain_key: str) -> str:
        """A chain's head (entries, newest link), beside the chain in its hash slot; scripts write it with it."""
        return f"{chain_key}:head"

    @property
    def heads_kept_key(self) -> str:
        """Set once the chains an older hitl wrote were given heads (``hitl audit verify`` does it once)."""
        return f"{self.p}:heads-kept"

    def anchor_key(self, digest: str) -> str:
        """The heads ``hitl audit head`` recorded under ``digest`` (a hash: chain -> "length link")."""
        return f"{self.p}:anchor:{digest}"

    @property
    def events_key(self) -> str:
        """The stream of audit entries that belong to no approval (trust grants, forced resumes)."""
        return f"{self.p}:audit"

    # -- calls ------------------------------------------------------------------------------------------
    async def call(self, script: AsyncScript, keys: list[str], args: list[Any]) -> list[Any]:
        """One script, one round trip, on the script calls' own connections (:mod:`.calls` says why not
        ``Redis.evalsha``); loads the script once if the server lost it (restart, SCRIPT FLUSH)."""
        try:
            try:
                out = await self.scripts.evalsha(script.sha, keys, args)
            except NoScriptError:
                await self.r.script_load(script.script)
                out = await self.scripts.evalsha(script.sha, keys, args)
        except (RedisError, OSError) as exc:
            raise _failed(exc) from exc
        return list(out)

    async def pipeline(self, build: Callable[[Pipeline], None], scripts: list[AsyncScript]) -> list[Any]:
        """One round trip; loads the scripts once if the server lost them (restart, SCRIPT FLUSH)."""
        for attempt in (1, 2):
            try:
                async with self.r.pipeline(transaction=False) as pipe:
                    build(pipe)
                    return list(await pipe.execute())
            except NoScriptError:
                if attempt == 2:
                    raise _failed(NoScriptError("scripts could not be loaded")) from None
                for script in scripts:
                    await self.r.script_load(script.script)
            except (RedisError, OSError) as exc:
                raise _failed(exc) from exc
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.scripts.close()
        await self.r.aclose()
