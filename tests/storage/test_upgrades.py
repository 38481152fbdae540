"""Record changes meet stores the previous release wrote: each store is built as that release left it (its schema
and its rows), then opened by this one.

Trust grants (schema 8 on SQLite, 4 on PostgreSQL, new keys on Redis): a grant now covers one requester in one
session. The grants an older hitl wrote named no requester, so the upgrade drops them (they would have lapsed within
``trust_ttl``) and keeps everything else; each dropped grant ends in the audit trail (``trust_ended``, reason
``upgrade``), which still verifies, and ``hitl migrate`` says what it changed on every store.

Approval kinds (schema 9 on SQLite, 5 on PostgreSQL, the upgrade on Redis): a field of the document. A document
an older hitl wrote marked a practice copy in its metadata and an effect in doubt by its tool name; the upgrade
writes the kind those meant, and the approval reads back exactly as it was otherwise.

Alert states (schema 10 on SQLite, 6 on PostgreSQL, the upgrade on Redis): a space of their own. An older hitl
kept each as a run record named ``alert:<name>``; the upgrade moves it, and leaves a caller's own run of such a name.

Group cards (schema 13 on SQLite, 9 on PostgreSQL, a new key on Redis): one message may show several approvals. A
card an older hitl posted stays where it was, and a second approval can now be recorded on one message.

The inbox's filters (schema 21 on SQLite, 17 on PostgreSQL, layout 5 on Redis): indexes built over the approvals
an older hitl decided, so a filter by reviewer, tool or status finds them, and kept from then on; on the SQL stores
each approval's tool and tier become columns, taken from its document. Schema 22 on SQLite drops the pending and the
decided indexes, which the status index answers for: the queue and the history list as before.

Redis key layout 2: a caller's id inside a run, claim or window key is encoded. A Redis store upgrades at its first
operation (as SQLite and PostgreSQL migrate as they open), so a claim an older hitl recorded is found, never made again.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Status, Tier
from hitl.engine.domain.ranking import due_soon_at, rank_key
from hitl.engine.domain.records import AuditEntry, MessageRef
from hitl.engine.storage.codec import audit_for_creation
from hitl.engine.storage.paging import every_pending
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.postgres.connection import Conn
from hitl.engine.storage.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from hitl.engine.storage.redis import RedisStore
from hitl.engine.storage.redis.connection import LAYOUT, connect, key_id
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.storage.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from hitl.engine.testing.conformance.helpers import cmd
from hitl.testing import FakeClock, make_approval
from tests.api.cli_process import hitl
from tests.storage.older_rows import insert_older_approval, insert_older_audit, insert_older_audit_sqlite

_OLD_SESSION = "ses_old"
ALERT = {"kind": "alert", "status": "firing", "episode": 2, "value": 0.5, "since": 1.0}
CALLERS_RUN = {"status": "paused", "position": 0, "waiting": None}
_OLD_GRANT = AuditEntry(at=1.0, actor="U_SUPPORT1", event="trust_granted", detail=f"refund in {_OLD_SESSION}")
"""The audit entry an older hitl wrote for the grant each upgrade test's store holds."""


async def _grant_ended(store: SqliteStore | RedisStore | PostgresStore) -> None:
    """The grant the upgrade dropped ends in the trail once, after its grant, reason ``upgrade``; the trail verifies."""
    events = [e.event for e in await store.audit.entries() if e.event.startswith("trust_")]
    assert events[:2] == ["trust_granted", "trust_ended"], events
    [ended] = [e for e in await store.audit.entries() if e.event == "trust_ended"]
    assert (ended.actor, ended.outcome, ended.approval_id) == ("system:upgrade", "upgrade", None)
    assert ended.detail.startswith(f"refund in {_OLD_SESSION}, granted by U_SUPPORT1 until ")
    assert (await store.audit.verify())[1] is None


async def _alerts_moved(store: SqliteStore | RedisStore | PostgresStore) -> None:
    found = await store.alerts.load("stale")
    assert found is not None and (found.data, found.version) == (ALERT, 3)
    assert await store.runs.load("alert:stale") is None
    mine = await store.runs.load("alert:mine")
    assert mine is not None and mine.data == CALLERS_RUN


def _older(clock: FakeClock) -> list[tuple[Approval, dict[str, Any]]]:
    """Approvals as this release sees them, with the documents an older release stored for them (no kind)."""
    twin = make_approval(now=clock.now(), key="twin", args={"order_id": "1", "amount": 2**52 + 1, "f": 0.1})
    twin = twin.model_copy(update={"kind": ApprovalKind.PRACTICE, "metadata": {"kind": "practice", "of": "apr_X"}})
    doubt = make_approval(now=clock.now(), key="doubt", tool="doubt:refund", args={"tool": "refund"})
    doubt = doubt.model_copy(update={"kind": ApprovalKind.DOUBT, "metadata": {"kind": "doubt", "step": "s"}})
    plain = make_approval(now=clock.now(), key="plain")
    out = []
    for a in (twin, doubt, plain):
        doc = a.model_dump(mode="json")
        del doc["kind"]
        out.append((a, doc))
    return out


async def _kinds_read_back(store: SqliteStore | RedisStore | PostgresStore, older: list[tuple[Approval, Any]]) -> None:
    for a, _ in older:
        assert await store.approvals.get(a.id) == a


_OLD_CARD = MessageRef(channel="C_OLD", ts="1700000000.000100")


async def _groups_work_after(
    store: SqliteStore | RedisStore | PostgresStore, carded: Approval, clock: FakeClock
) -> None:
    """The card an older hitl recorded is read as before; a second approval can now share its message."""
    assert await store.messages.get(carded.id) == _OLD_CARD
    assert await store.messages.shown_on(_OLD_CARD) == [carded.id]
    other = make_approval(now=clock.now(), key="grouped-after")
    await store.approvals.create(other)
    await store.messages.set(other.id, _OLD_CARD)
    assert await store.messages.shown_on(_OLD_CARD) == sorted([carded.id, other.id])


async def _ranked_after(store: SqliteStore | RedisStore | PostgresStore, clock: FakeClock) -> None:
    """Every approval an older hitl left pending is in the ranked queue, at the rank its document gives, beside one
    written now that escalates and so comes first."""
    pending = [a async for a in every_pending(store.approvals)]
    urgent = make_approval(now=clock.now(), key="urgent-after", tier=Tier.ESCALATE, role=None)
    await store.approvals.create(urgent)
    ranked = await store.approvals.list_pending(order="rank", limit=500)
    expected = sorted([*pending, urgent], key=lambda a: (rank_key(a), a.id))
    assert [a.id for a in ranked.items] == [a.id for a in expected] and ranked.items[0].id == urgent.id
    assert len(pending) >= 3
    # And in the due-soon index, at when each becomes due soon: once all are, every one is found.
    later = max(a.expires_at for a in expected) + 1
    due = await store.approvals.list_due_soon(now=later, limit=500)
    assert [a.id for a in due] == [a.id for a in sorted(expected, key=lambda a: (due_soon_at(a), a.id))]


async def _trust_works_after(store: SqliteStore | RedisStore | PostgresStore, clock: FakeClock) -> None:
    """The upgraded store: the old grant does not count for anyone, the approval written before is intact, and a
    Trust decided now writes its grant for the approval's requester."""
    now = clock.now()
    for requester in ("agent:riley", "agent", ""):
        assert await store.trust.active(_OLD_SESSION, requester=requester, now=now) == []
    assert await store.trust.all_active(now=now) == []
    a = make_approval(now=now, session_id=_OLD_SESSION, key="after")
    await store.approvals.create(a)
    out = await store.approvals.decide(cmd(a, "U_SUPPORT1", DecisionKind.TRUST, trust_until=now + 60), now=now)
    assert out.status is Status.APPROVED
    grants = await store.trust.active(_OLD_SESSION, requester="agent:riley", now=now)
    assert [(g.tool, g.requester) for g in grants] == [("refund", "agent:riley")]


async def _sql_store_upgraded(
    store: SqliteStore | PostgresStore, earlier: Approval, older: list[tuple[Approval, Any]], clock: FakeClock
) -> None:
    """What a SQL store the previous release left holds once this one has migrated it: the kinds written, the queue
    ranked, trust for a requester, the alert states moved, the card grouped, and the dropped grant ended."""
    await _kinds_read_back(store, older)
    await _ranked_after(store, clock)
    await _trust_works_after(store, clock)
    await _alerts_moved(store)
    await _groups_work_after(store, earlier, clock)
    await _grant_ended(store)


def _schema_7(db: sqlite3.Connection) -> None:
    """A file as the release that wrote schema 7 left it, tables only."""
    for _version, step in SQLITE_MIGRATIONS[:1]:
        step(db)
    db.execute(f"PRAGMA user_version = {SQLITE_MIGRATIONS[0][0]}")


def _older_grant_sqlite(db: sqlite3.Connection, clock: FakeClock) -> None:
    """A grant as schema 7 kept it (naming no requester), with the audit entry it was given."""
    db.execute(
        "INSERT INTO trust (session_id, tool, granted_by, until) VALUES (?, 'refund', 'U_SUPPORT1', ?)",
        (_OLD_SESSION, clock.now() + 3600),
    )
    insert_older_audit_sqlite(db, _OLD_GRANT)


async def _migrations_1_to_3_with_an_older_grant(conn: Conn, schema: str, clock: FakeClock) -> None:
    """A PostgreSQL schema as the release that wrote migration 3 left it: its migrations, and a grant as that release
    kept it (naming no requester) with the audit entry it was given."""
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.execute(
        "CREATE TABLE hitl_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    for version, sql in PG_MIGRATIONS[:3]:
        await conn.execute(sql)
        await conn.execute("INSERT INTO hitl_schema (version) VALUES ($1)", version)
    await conn.execute(
        "INSERT INTO trust (session_id, tool, granted_by, until) VALUES ($1, 'refund', 'U_SUPPORT1', $2)",
        _OLD_SESSION,
        clock.now() + 3600,
    )
    await insert_older_audit(conn, _OLD_GRANT)


async def test_sqlite_drops_the_grants_schema_7_wrote_and_keeps_the_rest(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "old.db"
    earlier = make_approval(now=clock.now(), key="earlier")
    older = _older(clock)
    with sqlite3.connect(path) as db:  # as the previous release left a file: schema 7, a grant, an approval
        _schema_7(db)
        _older_grant_sqlite(db, clock)
        db.execute(
            "INSERT INTO approvals (id, status, version, created_at, expires_at, required_role, requester, doc) "
            "VALUES (?, 'pending', 1, ?, ?, 'support', ?, ?)",
            (earlier.id, earlier.created_at, earlier.expires_at, earlier.requester, earlier.model_dump_json()),
        )
        insert_older_audit_sqlite(db, audit_for_creation(earlier))
        for a, doc in older:
            db.execute(
                "INSERT INTO approvals (id, status, version, created_at, expires_at, required_role, requester, doc) "
                "VALUES (?, 'pending', 1, ?, ?, 'support', ?, ?)",
                (a.id, a.created_at, a.expires_at, a.requester, json.dumps(doc)),
            )
            insert_older_audit_sqlite(db, audit_for_creation(a))
        db.execute(
            "INSERT INTO messages (approval_id, channel, ts) VALUES (?, ?, ?)",
            (earlier.id, _OLD_CARD.channel, _OLD_CARD.ts),
        )
        for run_id, version, data in (("alert:stale", 3, ALERT), ("alert:mine", 1, CALLERS_RUN)):
            db.execute(
                "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES (?, ?, ?, 1.0, ?)",
                (run_id, version, json.dumps(data), data["status"]),
            )
    store = SqliteStore(path)
    try:
        assert await store.approvals.get(earlier.id) == earlier
        await _sql_store_upgraded(store, earlier, older, clock)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SQLITE_MIGRATIONS[-1][0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        kinds = dict(db.execute("SELECT id, json_extract(doc, '$.kind') FROM approvals").fetchall())
        columns = {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, tool, tier FROM approvals")}
    assert "trust" not in tables and "trust_grants" in tables
    assert {a.id: kinds[a.id] for a, _ in older} == {a.id: str(a.kind) for a, _ in older}  # written, not derived
    everyone = [earlier, *(a for a, _ in older)]
    assert {a.id: columns[a.id] for a in everyone} == _tools_and_tiers(everyone)


async def test_postgres_drops_the_grants_schema_3_wrote_and_keeps_the_rest(postgres_url: str, clock: FakeClock) -> None:
    schema = f"u{uuid.uuid4().hex[:10]}"
    earlier = make_approval(now=clock.now(), key="earlier")
    older = _older(clock)
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
    try:  # as the previous release left it: migrations 1-3, a grant, an approval with its audit
        await _migrations_1_to_3_with_an_older_grant(conn, schema, clock)
        async with conn.transaction():
            await insert_older_approval(conn, earlier)
            await insert_older_audit(conn, audit_for_creation(earlier))
            await conn.execute(
                "INSERT INTO messages (approval_id, channel, ts) VALUES ($1, $2, $3)",
                earlier.id,
                _OLD_CARD.channel,
                _OLD_CARD.ts,
            )
            for a, doc in older:
                await conn.execute(
                    "INSERT INTO approvals (id, status, version, created_at, expires_at, required_role, requester, "
                    "doc) VALUES ($1, 'pending', 1, $2, $3, 'support', $4, $5)",
                    a.id,
                    a.created_at,
                    a.expires_at,
                    a.requester,
                    json.dumps(doc),
                )
                await insert_older_audit(conn, audit_for_creation(a))
            for run_id, version, data in (("alert:stale", 3, ALERT), ("alert:mine", 1, CALLERS_RUN)):
                await conn.execute(
                    "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES ($1, $2, $3, 1.0, $4)",
                    run_id,
                    version,
                    json.dumps(data),
                    data["status"],
                )
    finally:
        await conn.close()
    store = PostgresStore(postgres_url, schema=schema)
    try:
        assert await store.migrate() == [v for v, _ in PG_MIGRATIONS[3:]]
        assert await store.approvals.get(earlier.id) == earlier
        assert await store.audit.verify() == (6, None)  # the grant's two entries: granted, ended at the upgrade
        await _sql_store_upgraded(store, earlier, older, clock)
    finally:
        await store.close()
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
    try:
        rows = await conn.fetch("SELECT id, doc::jsonb ->> 'kind' FROM approvals")
        kinds = {str(r[0]): str(r[1]) for r in rows}
        columns = {r[0]: (r[1], r[2]) for r in await conn.fetch("SELECT id, tool, tier FROM approvals")}
    finally:
        await conn.close()
    assert {a.id: kinds[a.id] for a, _ in older} == {a.id: str(a.kind) for a, _ in older}
    everyone = [earlier, *(a for a, _ in older)]
    assert {a.id: columns[a.id] for a in everyone} == _tools_and_tiers(everyone)


async def _doc(store: RedisStore, approval_id: str) -> str:
    doc = await store.conn.r.get(store.conn.doc_key(approval_id))
    assert doc is not None
    return doc.decode() if isinstance(doc, bytes) else doc


async def _as_an_older_hitl_laid_them_out(store: RedisStore) -> None:
    """Rename every key this release built from a caller's id to the id as given, and remove the layout mark: the
    store as the previous release left it (the records themselves were the same)."""
    c = store.conn
    for kind in ("run", "claim", "win"):
        head = f"{store.prefix}:{kind}:{{"
        for key in [k async for k in c.r.scan_iter(match=f"{head}*")]:
            raw = f"{head}{key_id(key[len(head) : -1])}}}"
            if raw != key:
                await c.r.rename(key, raw)
    await _as_layout_2_left_them(store)
    await c.r.delete(c.layout_key)


async def _as_layout_2_left_them(store: RedisStore) -> None:
    """Remove the ranked indexes and mark the layout before them (2): the store as the release before the previous
    one left it (no due-soon index either)."""
    c = store.conn
    ranked = [k async for k in c.r.scan_iter(match=f"{store.prefix}:ranked:*")]
    if ranked:
        await c.r.delete(*ranked)
    await _as_layout_3_left_them(store)
    await c.r.set(c.layout_key, "2")


async def _as_layout_3_left_them(store: RedisStore) -> None:
    """Remove the due-soon index and mark the layout before it (3): the store as the previous release left it."""
    c = store.conn
    await c.r.delete(c.soon_key)
    await c.r.set(c.layout_key, "3")


@asynccontextmanager
async def _this_release(redis_url: str, older: RedisStore) -> AsyncIterator[RedisStore]:
    """The store ``older`` left, opened by this release, which upgrades it at its first operation."""
    upgraded = RedisStore(connect(redis_url), prefix=older.prefix)
    try:
        yield upgraded
    finally:
        await upgraded.close()


async def _pending_left(store: RedisStore, clock: FakeClock, key: str) -> None:
    """Three pending approvals an older layout is to keep, created a second apart and all expiring at one moment."""
    for i in range(3):
        await store.approvals.create(make_approval(now=clock.advance(1), key=f"{key}{i}", ttl=900.0 - i))


async def test_redis_upgrades_what_an_older_hitl_wrote_at_its_first_operation(
    redis_store: RedisStore, redis_url: str, clock: FakeClock
) -> None:
    c = redis_store.conn
    older = _older(clock)
    for a, doc in older:  # stored as this release stores them, then the document as an older one wrote it
        await redis_store.approvals.create(a)
        static = json.loads(await _doc(redis_store, a.id))
        assert static.pop("kind") == str(a.kind)
        await c.r.set(c.doc_key(a.id), json.dumps({**static, "metadata": doc["metadata"]}))
    for version in range(3):
        await redis_store.runs.save("alert:stale", ALERT, expected_version=version, now=1.0)  # as an older one did
    await redis_store.runs.save("alert:mine", CALLERS_RUN, expected_version=0, now=1.0)
    await redis_store.runs.save("a%3Ab", CALLERS_RUN, expected_version=0, now=1.0)  # an id that looks encoded
    paid = await redis_store.ledger.claim("ses_old:pay:1", action_hash="h", holder="w", now=1.0, lease=60)
    await redis_store.ledger.record_outcome(
        "ses_old:pay:1", holder="w", attempt=paid.attempt, ok=True, result={"paid": 1}, now=1.0
    )
    await redis_store.windows.add("cap:{bob}", amount=40.0, now=clock.now(), window=3600, event_id="e1")
    await _as_an_older_hitl_laid_them_out(redis_store)
    assert await c.r.exists(f"{redis_store.prefix}:claim:{{ses_old:pay:1}}") == 1
    # As the previous release wrote a grant: a hash per session (tool -> [until, by]) and the set of sessions.
    legacy = c.legacy_trust_key(_OLD_SESSION)
    await c.r.hset(legacy, "refund", json.dumps([clock.now() + 3600, "U_SUPPORT1"]))
    await c.r.sadd(c.legacy_trust_sessions_key, _OLD_SESSION)
    await redis_store.audit.append(_OLD_GRANT)
    carded = make_approval(now=clock.now(), key="carded")  # a card as an older hitl recorded it: one string key
    await redis_store.approvals.create(carded)
    await c.r.hset(c.message_key(carded.id), mapping={"channel": _OLD_CARD.channel, "ts": _OLD_CARD.ts})
    await c.r.set(c.message_ref_key(_OLD_CARD.channel, _OLD_CARD.ts), carded.id)

    async with _this_release(redis_url, redis_store) as upgraded:  # this release, starting
        # The paid claim is found: claiming it again hands over its outcome, never a second execution.
        again = await upgraded.ledger.claim("ses_old:pay:1", action_hash="h", holder="w2", now=2.0, lease=60)
        assert not again.acquired and again.result == {"paid": 1}
        assert await c.r.get(c.layout_key) == LAYOUT
        assert await c.r.exists(legacy, c.legacy_trust_sessions_key) == 0
        for a, _ in older:
            assert json.loads(await _doc(upgraded, a.id))["kind"] == str(a.kind)
        await _kinds_read_back(upgraded, older)
        await _ranked_after(upgraded, clock)
        await _alerts_moved(upgraded)
        odd = await upgraded.runs.load("a%3Ab")
        assert odd is not None and odd.data == CALLERS_RUN
        assert sorted(await upgraded.runs.paused()) == ["a%3Ab", "alert:mine"]
        window = await upgraded.windows.stats("cap:{bob}", now=clock.now(), window=3600)
        assert (window.count, window.total) == (1, 40.0)
        await _trust_works_after(upgraded, clock)
        assert await upgraded.messages.shown_on(_OLD_CARD) == [carded.id]
        assert await upgraded.messages.approval_for(_OLD_CARD) == carded.id
        assert await upgraded.migrate() == []  # again, on purpose: nothing is encoded twice
        assert (await upgraded.runs.load("a%3Ab")) == odd
        assert (await upgraded.ledger.get("ses_old:pay:1")) is not None
        assert [g.requester for g in await upgraded.trust.all_active(now=clock.now())] == ["agent:riley"]
        await _grant_ended(upgraded)  # once, though the upgrade ran twice


async def test_redis_ranks_the_pending_approvals_the_previous_layout_left_and_encodes_no_key_twice(
    redis_store: RedisStore, redis_url: str, clock: FakeClock
) -> None:
    await _pending_left(redis_store, clock, "left")
    await redis_store.runs.save("a%3Ab", CALLERS_RUN, expected_version=0, now=1.0)  # a key layout 2 encoded
    await _as_layout_2_left_them(redis_store)
    async with _this_release(redis_url, redis_store) as upgraded:
        await _ranked_after(upgraded, clock)
        assert await upgraded.conn.r.get(upgraded.conn.layout_key) == LAYOUT
        found = await upgraded.runs.load("a%3Ab")
        assert found is not None and found.data == CALLERS_RUN


async def test_redis_indexes_when_the_pending_approvals_the_previous_layout_left_become_due_soon(
    redis_store: RedisStore, redis_url: str, clock: FakeClock
) -> None:
    await _pending_left(redis_store, clock, "soon")
    await _as_layout_3_left_them(redis_store)
    assert await redis_store.approvals.list_due_soon(now=clock.now() + 3600) == []  # layout 3 kept no such index
    async with _this_release(redis_url, redis_store) as upgraded:
        await _ranked_after(upgraded, clock)
        assert await upgraded.conn.r.get(upgraded.conn.layout_key) == LAYOUT


async def test_a_new_redis_store_is_marked_without_an_upgrade(redis_store: RedisStore) -> None:
    c = redis_store.conn
    assert await c.r.get(c.layout_key) is None
    await redis_store.halts.active()
    assert await c.r.get(c.layout_key) == LAYOUT


async def _migrate_says(env: dict[str, str], applied: list[int]) -> None:
    """The real `hitl migrate` on a store an older hitl wrote names what it applied; run again, it changed nothing
    and says the schema is up to date; `hitl audit verify` then checks the trail, the ended grant in it."""
    code, out, err = await hitl("migrate", env=env)
    assert code == 0, err
    assert out.strip() == "applied schema version " + ", ".join(map(str, applied)), out
    code, out, err = await hitl("migrate", env=env)
    assert (code, out.strip()) == (0, "the schema is up to date"), err
    code, out, err = await hitl("audit", "verify", env=env)
    assert code == 0, (out, err)


async def test_hitl_migrate_on_sqlite_says_what_it_applied_and_ends_the_older_grants(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        _schema_7(db)
        _older_grant_sqlite(db, clock)
    await _migrate_says({"HITL_STORE": f"sqlite:///{path}", "HITL_CONFIG": ""}, [v for v, _ in SQLITE_MIGRATIONS[1:]])
    store = SqliteStore(path)
    try:
        await _grant_ended(store)
    finally:
        await store.close()


async def test_hitl_migrate_on_postgres_says_what_it_applied_and_ends_the_older_grants(
    postgres_url: str, clock: FakeClock
) -> None:
    schema = f"u{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
    try:  # migrations 1-3 and a grant with its audit entry, as the previous release left them
        await _migrations_1_to_3_with_an_older_grant(conn, schema, clock)
    finally:
        await conn.close()
    url = f"{postgres_url}?schema={schema}"
    await _migrate_says({"HITL_STORE": url, "HITL_CONFIG": ""}, [v for v, _ in PG_MIGRATIONS[3:]])
    store = PostgresStore(postgres_url, schema=schema)
    try:
        await _grant_ended(store)
    finally:
        await store.close()


async def test_hitl_migrate_on_redis_says_it_upgraded_the_key_layout_and_ends_the_older_grants(
    redis_store: RedisStore, redis_url: str, clock: FakeClock
) -> None:
    c = redis_store.conn
    await redis_store.runs.save("run:1", CALLERS_RUN, expected_version=0, now=1.0)
    await redis_store.audit.append(_OLD_GRANT)
    await _as_an_older_hitl_laid_them_out(redis_store)
    await c.r.hset(c.legacy_trust_key(_OLD_SESSION), "refund", json.dumps([clock.now() + 3600, "U_SUPPORT1"]))
    await c.r.sadd(c.legacy_trust_sessions_key, _OLD_SESSION)
    await _migrate_says({"HITL_STORE": f"{redis_url}?prefix={redis_store.prefix}", "HITL_CONFIG": ""}, [int(LAYOUT)])
    assert await c.r.get(c.layout_key) == LAYOUT
    assert await c.r.exists(c.legacy_trust_key(_OLD_SESSION), c.legacy_trust_sessions_key) == 0
    await _grant_ended(redis_store)


# The inbox's filters (schema 21 on SQLite, migration 17 on PostgreSQL, layout 5 on Redis): indexes of tool, tier,
# requester, every decided approval and who decided what, built over what the previous release wrote.
async def _decided_before(store: SqliteStore | RedisStore | PostgresStore, clock: FakeClock) -> list[Approval]:
    """Approvals the previous release decided: approved by U_OLD, rejected by U_OTHER, one vote of two by U_OLD;
    one with a NUL in its arguments (stored as ``\u0000``, which PostgreSQL's ``jsonb`` refuses to hold)."""
    made = []
    for i in range(6):
        args = {"order_id": "78291", "amount": 49, "note": "a\x00b"} if i == 2 else None
        a = make_approval(now=clock.advance(1), key=f"old{i}", tool=("refund", "delete_customer")[i % 2], args=args)
        a = a.model_copy(update={"quorum": 2 if i == 5 else 1})
        await store.approvals.create(a)
        if i == 1:
            await store.approvals.decide(cmd(a, "U_OTHER", DecisionKind.REJECT, reason="no"), now=clock.now())
        elif i != 4:
            await store.approvals.decide(cmd(a, "U_OLD"), now=clock.now())
        made.append(a)
    return made


async def _decided_then_closed(store: SqliteStore | PostgresStore, clock: FakeClock) -> list[Approval]:
    """``_decided_before`` on ``store``, closed after, so that a test can take its schema back to the previous
    release's."""
    try:
        return await _decided_before(store, clock)
    finally:
        await store.close()


async def _filters_after(
    store: SqliteStore | RedisStore | PostgresStore, made: list[Approval], clock: FakeClock
) -> None:
    """Each filter finds the approvals the previous release wrote, newest first; a decision recorded now is found
    beside them."""
    ids = [a.id for a in reversed(made)]

    async def listed(where: ApprovalFilter) -> list[str]:
        return [a.id for a in (await store.approvals.list_matching(where, limit=50)).items]

    assert await listed(ApprovalFilter(reviewer="U_OLD")) == [ids[0], *ids[2:4], *ids[5:]]
    assert await listed(ApprovalFilter(reviewer="U_OTHER", status=Status.REJECTED)) == [made[1].id]
    assert await listed(ApprovalFilter(tool="delete_customer", status="decided")) == [made[3].id, made[1].id]
    assert await listed(ApprovalFilter(status=Status.PENDING)) == [made[5].id, made[4].id]
    done = await store.approvals.decide(cmd(made[4], "U_OLD"), now=clock.now())
    assert (await listed(ApprovalFilter(reviewer="U_OLD", status="decided")))[:2] == [done.id, made[3].id]


def _tools_and_tiers(made: list[Approval]) -> dict[str, tuple[str, str]]:
    """The tool and tier columns the upgrade must have written for ``made``: each as its document says."""
    return {a.id: (a.tool, str(a.tier)) for a in made}


async def test_sqlite_indexes_the_filters_over_what_schema_20_wrote(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "old.db"
    made = await _decided_then_closed(SqliteStore(path), clock)
    with sqlite3.connect(path) as db:  # as schema 20 left the file: none of the filters' indexes or columns
        db.execute("DROP TRIGGER approval_reviewers_purged")
        for index in ("approvals_by_tool", "approvals_by_tier", "approvals_by_requester"):
            db.execute(f"DROP INDEX {index}")
        for name, on in _UNREAD_INDEXES.items():  # which schema 22 drops (the decided one came with 21)
            if name != "approvals_decided":
                db.execute(f"CREATE INDEX {name} ON approvals {on}")
        db.execute("DROP TABLE approval_reviewers")
        db.execute("ALTER TABLE approvals DROP COLUMN tool")
        db.execute("ALTER TABLE approvals DROP COLUMN tier")
        db.execute("PRAGMA user_version = 20")
    store = SqliteStore(path)
    try:
        await _filters_after(store, made, clock)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SQLITE_MIGRATIONS[-1][0]
        columns = {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, tool, tier FROM approvals")}
    assert {aid: columns[aid] for aid in _tools_and_tiers(made)} == _tools_and_tiers(made)


# Schema 22 on SQLite: five indexes no query reads, dropped (each one more entry every decide wrote): the status index
# (status, created_at, id) answers for the pending one (its 'pending' range) and the decided one (its other ranges,
# read merged); no plan picks the three by role.
_UNREAD_INDEXES = {
    "approvals_pending": "(created_at, id) WHERE status = 'pending'",
    "approvals_decided": "(created_at, id) WHERE status != 'pending'",
    "approvals_pending_role": "(required_role, created_at, id) WHERE status = 'pending'",
    "approvals_ranked_role": "(required_role, rank, id) WHERE status = 'pending'",
    "approvals_backup": "(backup_role, rank, id) WHERE status = 'pending' AND backup_role IS NOT NULL",
}


async def test_sqlite_drops_the_indexes_no_query_reads_over_what_schema_21_wrote(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "old.db"
    made = await _decided_then_closed(SqliteStore(path), clock)
    with sqlite3.connect(path) as db:  # as schema 21 left the file: the five indexes beside the status one
        for name, on in _UNREAD_INDEXES.items():
            db.execute(f"CREATE INDEX {name} ON approvals {on}")
        db.execute("PRAGMA user_version = 21")
    store = SqliteStore(path)
    try:
        assert await store.migrate() == [22]
        # The queue and the history list from the status index: oldest pending first, every decided one newest first.
        assert [a.id for a in (await store.approvals.list_pending(limit=50)).items] == [made[4].id, made[5].id]
        decided = await store.approvals.list_matching(ApprovalFilter(status="decided"), limit=3)
        rest = await store.approvals.list_matching(ApprovalFilter(status="decided"), limit=3, cursor=decided.cursor)
        assert [a.id for a in [*decided.items, *rest.items]] == [a.id for a in reversed(made[:4])]
        await _filters_after(store, made, clock)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'approvals'")}
    assert set(_UNREAD_INDEXES).isdisjoint(indexes), indexes
    assert "approvals_by_status" in indexes


async def test_postgres_indexes_the_filters_over_what_migration_16_wrote(postgres_url: str, clock: FakeClock) -> None:
    schema = f"u{uuid.uuid4().hex[:10]}"
    made = await _decided_then_closed(PostgresStore(postgres_url, schema=schema), clock)
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
    try:  # as migration 16 left the schema: none of the filters' indexes or columns
        await conn.execute("DROP TABLE approval_reviewers")
        for index in ("approvals_by_tool", "approvals_by_tier", "approvals_by_requester", "approvals_decided"):
            await conn.execute(f"DROP INDEX {index}")
        await conn.execute("ALTER TABLE approvals DROP COLUMN tool, DROP COLUMN tier")
        await conn.execute("DELETE FROM hitl_schema WHERE version = 17")
    finally:
        await conn.close()
    store = PostgresStore(postgres_url, schema=schema)
    try:
        assert await store.migrate() == [17]
        await _filters_after(store, made, clock)
    finally:
        await store.close()
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
    try:
        columns = {r[0]: (r[1], r[2]) for r in await conn.fetch("SELECT id, tool, tier FROM approvals")}
    finally:
        await conn.close()
    assert {aid: columns[aid] for aid in _tools_and_tiers(made)} == _tools_and_tiers(made)


async def test_redis_indexes_the_filters_over_what_layout_4_left(
    redis_store: RedisStore, redis_url: str, clock: FakeClock
) -> None:
    made = await _decided_before(redis_store, clock)
    c = redis_store.conn
    filters = [k async for k in c.r.scan_iter(match=f"{redis_store.prefix}:by-*")]
    await c.r.delete(*filters, f"{redis_store.prefix}:decided", f"{redis_store.prefix}:voted")
    await c.r.set(c.layout_key, "4")  # as the previous release left the store: none of the filters' indexes
    assert (await redis_store.approvals.list_matching(ApprovalFilter(reviewer="U_OLD"))).items == []
    async with _this_release(redis_url, redis_store) as upgraded:
        await _filters_after(upgraded, made, clock)
        assert await c.r.get(c.layout_key) == LAYOUT
