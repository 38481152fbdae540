"""What only the PostgreSQL store has: migrations under an advisory lock, applied once however many replicas start
at once and keeping the data a store of the previous schema holds; writes guarded by what they were decided on; the
append-only audit table; wake-ups by NOTIFY across processes."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from hitl.engine.domain.models import Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import StoreError
from hitl.engine.storage.codec import audit_for_creation
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.postgres import approvals as pg_approvals
from hitl.engine.storage.postgres.connection import Conn
from hitl.engine.storage.postgres.rows import insert_job
from hitl.engine.storage.postgres.schema import MIGRATIONS
from hitl.engine.storage.postgres.writes import Writes, read_state
from hitl.engine.testing.conformance.helpers import cmd
from hitl.testing import FakeClock, make_approval
from tests.storage.older_rows import insert_older_approval, insert_older_audit
from tests.waiting import eventually


def _schema() -> str:
    return f"m{uuid.uuid4().hex[:10]}"


async def test_replicas_starting_at_once_apply_each_migration_once(postgres_url: str) -> None:
    schema = _schema()
    stores = [PostgresStore(postgres_url, schema=schema) for _ in range(6)]
    try:
        applied = await asyncio.gather(*(s.migrate() for s in stores))
        assert sorted(v for a in applied for v in a) == [v for v, _ in MIGRATIONS]  # each once, by someone
        assert sum(1 for a in applied if a) == 1  # the first to take the lock applied them all
        later = PostgresStore(postgres_url, schema=schema)
        stores.append(later)
        assert await later.migrate() == []  # a replica started afterwards finds it up to date
    finally:
        for s in stores:
            await s.close()


async def test_a_store_of_the_previous_schema_is_upgraded_and_keeps_its_data(
    postgres_url: str, clock: FakeClock
) -> None:
    schema = _schema()
    a = make_approval(now=clock.now())
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
    try:  # a store as the previous release left it: every migration but the last, and an approval with its audit
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(
            "CREATE TABLE hitl_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for version, sql in MIGRATIONS[:-1]:
            await conn.execute(sql)
            await conn.execute("INSERT INTO hitl_schema (version) VALUES ($1)", version)
        async with conn.transaction():  # written as the previous release wrote them: its audit columns only
            await insert_older_approval(conn, a)
            await insert_older_audit(conn, audit_for_creation(a))
            await insert_job(conn, "card", {"approval_id": a.id}, clock.now())
    finally:
        await conn.close()
    store = PostgresStore(postgres_url, schema=schema)
    try:
        assert await store.migrate() == [MIGRATIONS[-1][0]]
        assert await store.approvals.get(a.id) == a
        assert [x.id for x in (await store.approvals.list_pending(order="rank")).items] == [a.id]
        assert await store.audit.verify() == (1, None)
        assert await store.jobs.settle("card", approval_id=a.id) == 1
        decided = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())  # through the added guard
        assert decided.status is Status.APPROVED
        assert await store.audit.verify() == (2, None)
    finally:
        await store.close()


async def test_a_write_decided_on_rows_that_changed_since_its_read_is_refused_whole(
    postgres_url: str, clock: FakeClock
) -> None:
    store = PostgresStore(postgres_url, schema=_schema())
    try:
        a, _ = await store.approvals.create(make_approval(now=clock.now()))
        pool = await store.db.pool()
        async with pool.acquire() as c:
            found = await read_state(c, approvals=[a.id], chains=[a.id])
            decided = await store.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())  # lands in between
            stale = Writes(found, guarded=True)
            cancelled = found.approvals[a.id].model_copy(update={"status": Status.CANCELLED, "version": a.version + 1})
            stale.approval(cancelled)
            stale.audit(audit_for_creation(cancelled))
            with pytest.raises(asyncpg.SerializationError, match="changed since they were read"):
                await stale.send(c)
        assert await store.approvals.get(a.id) == decided  # nothing of the stale write landed
        assert await store.audit.verify() == (2, None)  # created, approved: the chain is whole

        attempts: list[int] = []

        async def racing(c: Conn) -> None:  # the first attempt is overtaken by another decision, the second is not
            found = await read_state(c, approvals=[a.id], chains=[a.id])
            attempts.append(found.approvals[a.id].version)
            if len(attempts) == 1:
                await store.approvals.transition(
                    a.id, target=Status.EXECUTING, expected_version=None, actor="other", now=clock.now()
                )
            w = Writes(found, guarded=True)
            w.audit(AuditEntry(at=clock.now(), actor="me", event="noted", approval_id=a.id))
            await w.send(c)

        await store.db.run(racing, guarded=True)
        assert attempts == [decided.version, decided.version + 1]  # run again from its read, on what was committed
        assert await store.audit.verify() == (4, None)

        # A connection that is not at SERIALIZABLE (a pooler dropped the setting): the guarded write refuses whole.
        plain = await asyncpg.connect(postgres_url, server_settings={"search_path": store.db.schema})
        try:
            found = await read_state(plain, approvals=[a.id], chains=[a.id])
            late = Writes(found, guarded=True)
            late.audit(AuditEntry(at=clock.now(), actor="me", event="noted", approval_id=a.id))
            with pytest.raises(asyncpg.InvalidTransactionStateError, match="runs at read committed"):
                await late.send(plain)
        finally:
            await plain.close()
        assert await store.audit.verify() == (4, None)
    finally:
        await store.close()


async def test_a_read_aborted_as_a_serialization_failure_is_read_again(postgres_url: str) -> None:
    # Every statement on the store's connections runs at SERIALIZABLE, where PostgreSQL may abort even a read.
    store = PostgresStore(postgres_url, schema=_schema())
    tries: list[int] = []

    async def read(c: Conn) -> int:
        tries.append(1)
        if len(tries) == 1:
            raise asyncpg.SerializationError("could not serialize access due to read/write dependencies")
        return int(await c.fetchval("SELECT 7"))

    try:
        assert await store.db.run(read, write=False) == 7
        assert len(tries) == 2
    finally:
        await store.close()


async def test_the_audit_table_refuses_updates_deletes_and_truncation(postgres_url: str, clock: FakeClock) -> None:
    store = PostgresStore(postgres_url, schema=_schema())
    try:
        await store.approvals.create(make_approval(now=clock.now()))
        for sql in ("UPDATE audit SET actor = 'mallory'", "DELETE FROM audit", "TRUNCATE audit"):

            async def rewrite(c: Conn, sql: str = sql) -> None:
                await c.execute(sql)

            with pytest.raises(StoreError, match="append-only"):
                await store.db.run(rewrite)
        assert (await store.audit.verify()) == (1, None)
    finally:
        await store.close()


async def test_a_decision_in_another_process_wakes_the_waiter_by_notify(
    postgres_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_approvals, "RECHECK", 3600.0)  # no second look: only the NOTIFY can wake the waiter
    schema = _schema()
    here, there = PostgresStore(postgres_url, schema=schema), PostgresStore(postgres_url, schema=schema)
    try:
        a, _ = await here.approvals.create(make_approval(now=clock.now()))
        waiter = asyncio.create_task(here.approvals.wait_changed(a.id, after_version=a.version, timeout=30))
        await asyncio.sleep(0.05)
        await there.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        changed = await asyncio.wait_for(waiter, 30)
        assert changed.version > a.version
    finally:
        await here.close()
        await there.close()


async def test_a_lost_listening_connection_is_opened_again_and_wakes_waiters_again(
    postgres_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server drops the listening connection (a restart, a failover, a proxy's idle timeout): the store opens it
    again, and a decision made in another process after that still wakes a waiter by NOTIFY alone."""
    monkeypatch.setattr(pg_approvals, "RECHECK", 3600.0)  # no second look: only a NOTIFY can wake the waiter
    schema = _schema()
    here, there = PostgresStore(postgres_url, schema=schema), PostgresStore(postgres_url, schema=schema)
    try:
        a, _ = await here.approvals.create(make_approval(now=clock.now()))
        lost = here.db.listener_pid()
        killer = await asyncpg.connect(postgres_url)
        try:
            assert await killer.fetchval("SELECT pg_terminate_backend($1)", lost)
        finally:
            await killer.close()
        await eventually(lambda: here.db.listener_pid() not in (None, lost), what="the listener to reconnect")
        waiter = asyncio.create_task(here.approvals.wait_changed(a.id, after_version=a.version, timeout=30))
        await asyncio.sleep(0.05)
        await there.approvals.decide(cmd(a, "U_SUPPORT1"), now=clock.now())
        assert (await asyncio.wait_for(waiter, 30)).version > a.version
    finally:
        await here.close()
        await there.close()


def test_the_store_url_names_the_schema_and_passes_the_rest_to_the_driver() -> None:
    from hitl.engine.storage import open_store

    store = open_store("postgres://u:p@db.internal:5432/app?schema=hitl_prod&sslmode=require&application_name=a%26b")
    assert isinstance(store, PostgresStore) and store.db.schema == "hitl_prod"
    assert store.db.dsn == "postgres://u:p@db.internal:5432/app?sslmode=require&application_name=a%26b"
    with pytest.raises(StoreError, match="lower-case SQL name"):
        open_store('postgresql://h/db?schema=x";drop')
