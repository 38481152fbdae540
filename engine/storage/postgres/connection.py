"""One PostgreSQL database, a pool of connections, and one transaction per call, retried when PostgreSQL says so.

Every call runs in a ``SERIALIZABLE`` transaction. Two calls that read and write the same rows (two decisions on one
approval, two appends to one audit chain, two commits of one run) cannot both commit: PostgreSQL aborts one with a
serialization failure, and it is run again, whole, on what the other committed. So each call's function is written
as if it were alone (as on SQLite, whose writes are serialized by the file's lock), without a lock to forget on
some path; the price is a retry under contention, which only calls on the same rows pay.

Changes are announced with ``NOTIFY`` inside the transaction, so they are delivered when (and only if) it commits:
one listening connection per process wakes the waiters of an approval that changed and the card poster when one is
created, without polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from hitl.engine.errors import EngineError, StoreError
from hitl.engine.storage.postgres.schema import MIGRATION_LOCK, MIGRATIONS
from hitl.engine.storage.signals import ChangeSignals

__all__ = ["Conn", "PgConnection", "migrate"]

T = TypeVar("T")
Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"
"""A connection a transaction runs on: the pool's, or one of its own (migrations)."""
_RETRY = (asyncpg.exceptions.SerializationError, asyncpg.exceptions.DeadlockDetectedError)
_ATTEMPTS = 64


class PgConnection:
    """The pool every part of the store shares, the listener, and the in-process change signals.

    Args:
        dsn: ``postgresql://user:password@host:port/database``.
        schema: the schema the tables live in (created when missing).
        min_size, max_size: the pool's connections.
        after_migrations: run after the numbered migrations, under their lock, at every opening (the store's:
            :func:`~.upgrade.end_dropped_grants`, which writes through this release's audit tables, so it cannot be
            a migration).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 10,
        after_migrations: Callable[[Conn], Awaitable[object]] | None = None,
    ) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,47}", schema):
            raise StoreError(f"schema must be a lower-case SQL name (letters, digits, _); got {schema!r}")
        self.dsn = dsn
        self.schema = schema
        self.changed_channel = f"{schema}_hitl_changed"
        """The channel an approval's id is announced on when it changes (one per schema: deployments sharing a
        database do not wake each other)."""
        self.created_channel = f"{schema}_hitl_created"
        """The channel a new approval's id is announced on."""
        # Every statement sent outside an explicit transaction is a SERIALIZABLE transaction of its own: a guarded
        # write (writes.py) checks what it was decided on and writes in one such statement. Generic plans: the
        # statements are planned once per connection, not per call (their lookups are by key with `=`, an index
        # lookup whatever the values; planning is otherwise a third of a statement's server time).
        self._settings = {
            "search_path": schema,
            "default_transaction_isolation": "serializable",
            "plan_cache_mode": "force_generic_plan",
        }
        self._sizes = (min_size, max_size)
        self._after_migrations = after_migrations
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._opening: asyncio.Lock | None = None
        self._listener: asyncpg.Connection[asyncpg.Record] | None = None
        self._relisten: asyncio.Task[None] | None = None
        self._signals = ChangeSignals()
        self._created: list[str] = []
        self._created_signal: asyncio.Event | None = None
        self.applied: list[int] = []
        """The migrations this process's opening applied (empty: the schema was up to date)."""
        self.transactions = 0
        """Transactions committed, and :attr:`retries`: those run again after a conflict (for the benchmarks)."""
        self.retries = 0

    # -- opening ----------------------------------------------------------------------------------------
    async def pool(self) -> asyncpg.Pool[asyncpg.Record]:
        """The pool, opened (and the schema migrated) on first use."""
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                # Migrations on a connection of their own, closed after: the advisory lock they hold never
                # outlives them on a pooled connection (pooled ones are not reset on release, see _released).
                conn = await asyncpg.connect(self.dsn, server_settings=self._settings)
                try:
                    self.applied = await migrate(conn, self.schema, after=self._after_migrations)
                finally:
                    await conn.close()
                pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=self._sizes[0],
                    max_size=self._sizes[1],
                    server_settings=self._settings,
                    reset=_released,
                )
                try:
                    self._listener = await self._listen()
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
        return self._pool

    async def _listen(self) -> asyncpg.Connection[asyncpg.Record]:
        """The listening connection: its own, outside the pool, held while the store is open, and opened again
        when it is lost (a restarted server, a failover, an idle timeout on the way)."""
        listener = await asyncpg.connect(self.dsn)
        await listener.add_listener(self.changed_channel, self._on_changed)
        await listener.add_listener(self.created_channel, self._on_created)
        listener.add_termination_listener(self._on_listener_lost)
        return listener

    def listener_pid(self) -> int | None:
        """The server process of the listening connection, while it is open (operators and tests)."""
        listener = self._listener
        return listener.get_server_pid() if listener is not None and not listener.is_closed() else None

    def _on_listener_lost(self, _conn: object) -> None:
        if self._pool is None or (self._relisten is not None and not self._relisten.done()):
            return  # closing, or already reconnecting
        self._relisten = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = 0.05
        while self._pool is not None:
            try:
                self._listener = await self._listen()
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            # Whatever changed while nobody listened: every waiter looks again (the card poster's sweep finds
            # approvals created meanwhile).
            self.changed(*list(self._signals.waiting))
            return

    # -- transactions -----------------------------------------------------------------------------------
    async def run(
        self,
        fn: Callable[[Conn], Awaitable[T]],
        *,
        write: bool = True,
        snapshot: bool = False,
        guarded: bool = False,
    ) -> T:
        """Run ``fn`` in one transaction, again from the start when PostgreSQL aborts it as a serialization
        failure or a deadlock; any database failure is a :class:`StoreError` and nothing of ``fn`` is applied.
        ``fn`` must touch nothing but the database (it may run more than once).

        A read (``write=False``) is one statement, atomic on its own: it runs without ``BEGIN`` and ``COMMIT``,
        one round trip instead of three. A read of several statements that must see one state (the audit walk)
        asks for a ``snapshot``: a read-only ``REPEATABLE READ`` transaction, which never aborts.

        A ``guarded`` call reads with :func:`~hitl.engine.storage.postgres.writes.read_state` and writes at most
        once, with a guarded :class:`~hitl.engine.storage.postgres.writes.Writes`: no ``BEGIN`` and ``COMMIT``
        (two round trips instead of four), and run again when the guard finds the rows it read changed."""
        try:
            pool = await self.pool()
            for attempt in range(_ATTEMPTS):
                async with pool.acquire() as conn:
                    try:
                        if not write and not snapshot:
                            # A statement of its own, SERIALIZABLE like every other on these connections, which
                            # PostgreSQL may abort as a serialization failure too (rarely, for a read): read again.
                            return await fn(conn)
                        if guarded:
                            out = await fn(conn)
                        else:
                            isolation: Literal["serializable", "repeatable_read"] = (
                                "serializable" if write else "repeatable_read"
                            )
                            async with conn.transaction(isolation=isolation, readonly=not write):
                                out = await fn(conn)
                        self.transactions += 1
                        return out
                    except _RETRY:
                        self.retries += 1
                        if attempt == _ATTEMPTS - 1:
                            raise
                # Spread the retries of calls that collided, so they do not collide again in step.
                await asyncio.sleep(random.uniform(0, 0.001 * min(attempt + 1, 20)))  # noqa: S311 - jitter only
            raise AssertionError("unreachable")  # the last attempt returns or raises
        except EngineError:
            raise
        except (TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            raise StoreError(
                f"PostgreSQL store failed: {exc}; nothing was applied. Check that the server is up and reachable, "
                "then retry",
            ) from exc

    # -- change signals ---------------------------------------------------------------------------------
    def changed(self, *approval_ids: str) -> None:
        """Approvals changed (committed, here or announced by another process): wake their waiters."""
        self._signals.changed(*approval_ids)

    def change_signal(self, approval_id: str) -> asyncio.Event:
        """An event set the next time ``approval_id`` changes, in this process or any other."""
        return self._signals.signal(approval_id)

    def created(self, *approval_ids: str) -> None:
        """Approvals were created: hand them to whoever waits for new ones."""
        if self._created_signal is None:
            return  # nobody watches in this process
        self._created.extend(i for i in approval_ids if i not in self._created)
        self._created_signal.set()

    @property
    def watching_created(self) -> bool:
        """Whether :meth:`watch_created` was called in this process."""
        return self._created_signal is not None

    def watch_created(self) -> None:
        """From now on, keep the ids of approvals created anywhere for :meth:`take_created`."""
        if self._created_signal is None:
            self._created_signal = asyncio.Event()

    async def take_created(self, *, timeout: float) -> list[str]:
        """The approvals created since the last call (waiting up to ``timeout`` seconds for one)."""
        signal = self._created_signal
        assert signal is not None, "watch_created first"
        if not self._created:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await signal.wait()
        signal.clear()
        out, self._created = self._created[:200], self._created[200:]
        if self._created:
            signal.set()
        return out

    def _on_changed(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self.changed(str(payload))

    def _on_created(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self.created(str(payload))

    async def close(self) -> None:
        """Stop listening and close the pool."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if self._relisten is not None:
            self._relisten.cancel()
        if self._listener is not None:
            with contextlib.suppress(Exception):  # a listener whose server went away: nothing left to close
                await self._listener.close(timeout=2)
            self._listener = None
        await pool.close()


async def _released(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """A pooled connection given back. The store's transactions leave no session state behind (no ``LISTEN``, no
    advisory lock, no ``SET``: the listener and migrations have connections of their own), so asyncpg's default reset
    (``RESET ALL; UNLISTEN *; ...``, a round trip per release) is skipped; a transaction left open by a cancelled
    call is rolled back."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def migrate(conn: Conn, schema: str, *, after: Callable[[Conn], Awaitable[object]] | None = None) -> list[int]:
    """Create ``schema`` if it is missing and apply the migrations it has not had, in order, under the advisory
    lock (``conn``'s search path names ``schema``), then ``after``; the versions applied (none when another process
    got there first). Creating the schema under the lock too: two processes opening a new one at once do not
    collide."""
    applied: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS hitl_schema (version INTEGER PRIMARY KEY, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {int(r[0]) for r in await conn.fetch("SELECT version FROM hitl_schema")}
        for version, sql in MIGRATIONS:
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO hitl_schema (version) VALUES ($1)", version)
            applied.append(version)
        if after is not None:
            await after(conn)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)
    return applied
