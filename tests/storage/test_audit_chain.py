"""The audit trail proves itself: `hitl audit verify` finds an edited SQLite row and an edited Redis list element."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hitl.cli import app
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.retention import DAY, Retention
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.agents.test_ask import CONFIG
from tests.storage.conftest import StoreUrl


async def _history(store: Store) -> str:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=FakeClock())
    ids = []
    for i in range(3):
        p = await svc.propose(ProposeRequest("refund", {"order_id": str(i), "amount": 10 + i}, session_id=f"s{i}"))
        assert p.approval is not None
        ids.append(p.approval.id)
    await svc.decide(DecideRequest(ids[1], "U_SUPPORT1", DecisionKind.APPROVE))
    await svc.decide(DecideRequest(ids[2], "U_SUPPORT2", DecisionKind.REJECT, reason="no"))
    return ids[1]


def _verify(url: str) -> tuple[int, dict[str, object]]:
    r = CliRunner().invoke(app, ["audit", "verify", "--json"], env={"HITL_STORE": url}, catch_exceptions=False)
    return r.exit_code, dict(json.loads(r.stdout))


async def test_verify_finds_the_first_broken_link(store_url: StoreUrl) -> None:
    url = store_url.url
    store = open_store(url)
    try:
        target = await _history(store)
    finally:
        await store.close()
    code, intact = await asyncio.to_thread(_verify, url)
    assert code == 0 and intact["intact"] is True and intact["checked"] == 5
    if store_url.backend == "sqlite":
        with sqlite3.connect(store_url.path) as db:  # the attacker drops the append-only guard first
            db.execute("DROP TRIGGER audit_no_update")
            db.execute("UPDATE audit SET actor = 'U_MALLORY' WHERE approval_id = ? AND event = 'decided'", (target,))
    else:
        store = open_store(url)
        try:
            key = store.conn.audit_key(target)  # type: ignore[attr-defined]
            element = await store.conn.r.lindex(key, 1)  # type: ignore[attr-defined]
            await store.conn.r.lset(key, 1, element.replace("U_SUPPORT1", "U_MALLORY"))  # type: ignore[attr-defined]
        finally:
            await store.close()
    code, broken = await asyncio.to_thread(_verify, url)
    assert code == 1 and broken["intact"] is False
    assert broken["broken"] == {
        "chain": target,
        "position": 2,
        "reason": "the entry was changed",
        "checked": broken["checked"],
    }


async def test_verify_finds_an_approval_whose_whole_trail_was_deleted(store_url: StoreUrl) -> None:
    url = store_url.url
    store = open_store(url)
    try:
        target = await _history(store)
        if store_url.backend == "redis":
            await store.conn.r.delete(store.conn.audit_key(target))  # type: ignore[attr-defined]
    finally:
        await store.close()
    if store_url.backend == "sqlite":
        with sqlite3.connect(store_url.path) as db:
            db.execute("DROP TRIGGER audit_no_delete")
            db.execute("DELETE FROM audit WHERE approval_id = ?", (target,))
    code, broken = await asyncio.to_thread(_verify, url)
    where = broken["broken"]
    assert code == 1 and isinstance(where, dict) and where["chain"] == target
    assert where["reason"] == "the approval's audit entries are missing"


def _purge(url: str, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["purge", *args], env={"HITL_STORE": url}, catch_exceptions=False)
    return r.exit_code, r.stdout


async def test_a_purge_keeps_the_trail_verifiable_and_a_removal_by_hand_still_shows(store_url: StoreUrl) -> None:
    url = store_url.url
    store = open_store(url)
    try:  # run-level entries, long ago (the CLI purges at the real time)
        for i in range(3):
            await store.audit.append(AuditEntry(at=1_000_000.0 + i, actor="cli", event="forced_resume", detail=str(i)))
        await store.audit.append(AuditEntry(at=time.time(), actor="cli", event="forced_resume", detail="recent"))
    finally:
        await store.close()
    code, said = await asyncio.to_thread(_purge, url, "--dry-run", "--json")
    assert code == 0 and json.loads(said)["would_remove"]["audit_entries"] == 3 and json.loads(said)["dry_run"]
    code, said = await asyncio.to_thread(_purge, url, "--dry-run")
    assert code == 0 and [line.split() for line in said.splitlines()[1:]] == [
        ["would", "remove", "count"],
        ["audit", "entries", "3"],
    ]
    code, intact = await asyncio.to_thread(_verify, url)
    assert intact["checked"] == 4  # the dry run removed nothing, and wrote nothing
    code, said = await asyncio.to_thread(_purge, url, "--retention", "30d", "--audit-retention", "400d", "--json")
    assert code == 0 and json.loads(said)["removed"]["audit_entries"] == 3
    code, intact = await asyncio.to_thread(_verify, url)
    assert code == 0 and intact["intact"] is True and intact["checked"] == 2  # the recent entry and the purge's
    code, said = await asyncio.to_thread(_purge, url)  # the defaults, as a person reads them
    assert code == 0 and said.splitlines() == ["retention: records 30d, audit 400d", "nothing to remove"]
    # Someone removes the oldest entry left by hand: the chain no longer starts after the purge's anchor.
    if store_url.backend == "sqlite":
        with sqlite3.connect(store_url.path) as db:
            db.execute("DROP TRIGGER audit_no_delete")
            db.execute("DELETE FROM audit WHERE seq = (SELECT MIN(seq) FROM audit)")
    else:
        store = open_store(url)
        try:
            r = store.conn.r  # type: ignore[attr-defined]
            [(first, _)] = await r.xrange(store.conn.events_key, count=1)  # type: ignore[attr-defined]
            await r.xdel(store.conn.events_key, first)  # type: ignore[attr-defined]
        finally:
            await store.close()
    code, broken = await asyncio.to_thread(_verify, url)
    assert code == 1 and broken["broken"] == {
        "chain": "events",
        "position": 1,
        "reason": "an entry before it was removed or moved",
        "checked": 0,
    }


def test_purge_refuses_horizons_it_cannot_keep(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/audit.db"
    code, _ = _purge(url, "--retention", "30d", "--audit-retention", "7d")
    assert code == 2
    r = CliRunner().invoke(app, ["purge", "--retention", "soon"], env={"HITL_STORE": url})
    said = " ".join(r.output.replace("│", " ").split())  # Rich boxes and wraps the message
    assert r.exit_code == 2 and "'soon' is not a duration" in said and "'never' to keep everything" in said


async def test_the_database_still_refuses_deletes_outside_a_purge_and_an_older_one_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # a version-4 database: the guard that refused every delete
        db.executescript(
            "CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, actor TEXT NOT NULL, "
            "event TEXT NOT NULL, approval_id TEXT, version INTEGER, action_hash TEXT, outcome TEXT NOT NULL, "
            "detail TEXT NOT NULL, prev TEXT NOT NULL DEFAULT '', link TEXT NOT NULL DEFAULT '');"
            "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit "
            "BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;"
            "PRAGMA user_version = 4;"
        )
    store = open_store(f"sqlite:///{path}")
    try:
        await store.audit.append(AuditEntry(at=1.0, actor="cli", event="note"))
        await store.audit.append(AuditEntry(at=2.0, actor="cli", event="note"))
        done = await store.purger.purge(Retention(records=DAY, audit=DAY), now=10 * DAY)
        assert done.audit_entries == 2 and (await store.audit.verify()) == (1, None)
    finally:
        await store.close()
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM audit")


def _cli(url: str, *args: str) -> tuple[int, dict[str, object]]:
    r = CliRunner().invoke(app, ["audit", *args, "--json"], env={"HITL_STORE": url}, catch_exceptions=False)
    return r.exit_code, dict(json.loads(r.stdout))


async def _cut_newest(store_url: StoreUrl, approval_id: str | None) -> None:
    """Remove the newest entry of an approval's chain (or of the run-level chain, for None), as someone with write
    access to the store would: dropping the append-only trigger first on SQLite, RPOP / XDEL on Redis."""
    if store_url.backend == "sqlite":
        with sqlite3.connect(store_url.path) as db:
            db.execute("DROP TRIGGER IF EXISTS audit_no_delete")
            db.execute(
                "DELETE FROM audit WHERE seq = (SELECT MAX(seq) FROM audit WHERE approval_id IS ?)", (approval_id,)
            )
        return
    store = open_store(store_url.url)
    try:
        conn = store.conn  # type: ignore[attr-defined]
        if approval_id is not None:
            await conn.r.rpop(conn.audit_key(approval_id))
        else:
            [(newest, _)] = await conn.r.xrevrange(conn.events_key, count=1)
            await conn.r.xdel(conn.events_key, newest)
    finally:
        await store.close()


@pytest.mark.parametrize("chain", ["approval", "events"])
async def test_verify_notices_a_chain_whose_newest_entry_was_removed(store_url: StoreUrl, chain: str) -> None:
    store = open_store(store_url.url)
    try:
        target = await _history(store)
        for i in range(2):
            await store.audit.append(AuditEntry(at=2_000_000.0 + i, actor="cli", event="forced_resume", detail=str(i)))
    finally:
        await store.close()
    code, intact = await asyncio.to_thread(_verify, store_url.url)
    assert code == 0 and intact["intact"] is True
    await _cut_newest(store_url, target if chain == "approval" else None)
    code, broken = await asyncio.to_thread(_verify, store_url.url)
    where = broken["broken"]
    assert code == 1 and isinstance(where, dict), broken
    assert where["chain"] == (target if chain == "approval" else "events")
    assert where["position"] == (2 if chain == "approval" else 2)
    assert "newest 1 entry was removed" in str(where["reason"]), where


async def test_a_head_kept_outside_proves_nothing_before_it_changed(store_url: StoreUrl) -> None:
    """`hitl audit head` prints a digest; `verify --head` passes while history only grows, and fails once an
    entry recorded before the digest is changed, even when the heads are rewritten to match."""
    store = open_store(store_url.url)
    try:
        target = await _history(store)
    finally:
        await store.close()
    code, took = await asyncio.to_thread(_cli, store_url.url, "head")
    digest = str(took["head"])
    assert code == 0 and len(digest) == 64
    store = open_store(store_url.url)
    try:  # history grows after the head was taken
        await store.audit.append(AuditEntry(at=3_000_000.0, actor="cli", event="forced_resume", detail="later"))
    finally:
        await store.close()
    code, intact = await asyncio.to_thread(_cli, store_url.url, "verify", "--head", digest)
    assert code == 0 and intact["intact"] is True, intact
    code, unknown = await asyncio.to_thread(_cli, store_url.url, "verify", "--head", "0" * 64)
    assert code == 1 and unknown["broken"]["chain"] == "heads"  # type: ignore[index]
    # A careful attacker removes the approval's newest entry and rewrites its head to match: the chains and heads
    # agree again, but the digest kept outside does not.
    await _cut_newest(store_url, target)
    if store_url.backend == "sqlite":
        with sqlite3.connect(store_url.path) as db:
            db.execute(
                "UPDATE audit_heads SET length = length - 1, "
                "link = (SELECT link FROM audit WHERE approval_id = ? ORDER BY seq DESC LIMIT 1) WHERE chain = ?",
                (target, target),
            )
    else:
        store = open_store(store_url.url)
        try:
            conn = store.conn  # type: ignore[attr-defined]
            last = json.loads(await conn.r.lindex(conn.audit_key(target), -1))
            await conn.r.hset(conn.head_key(conn.audit_key(target)), mapping={"n": 1, "link": last["link"]})
        finally:
            await store.close()
    code, plain = await asyncio.to_thread(_verify, store_url.url)
    assert code == 0 and plain["intact"] is True  # the store alone cannot tell
    code, broken = await asyncio.to_thread(_cli, store_url.url, "verify", "--head", digest)
    assert code == 1 and broken["broken"]["chain"] == target, broken  # type: ignore[index]
    assert "recorded before the head was taken" in broken["broken"]["reason"]  # type: ignore[index]


async def test_a_trail_an_older_hitl_wrote_gets_its_heads_and_then_guards_its_tail(store_url: StoreUrl) -> None:
    """A store from before heads existed: its chains are given heads as they stand (SQLite when it is opened,
    Redis at the first verify), after which a cut tail shows as on any other store."""
    store = open_store(store_url.url)
    try:
        target = await _history(store)
    finally:
        await store.close()
    if store_url.backend == "sqlite":
        with sqlite3.connect(store_url.path) as db:  # as schema 5 left it: no heads
            db.executescript("DROP TRIGGER audit_head; DROP TABLE audit_heads; PRAGMA user_version = 5;")
    else:
        store = open_store(store_url.url)
        try:
            conn = store.conn  # type: ignore[attr-defined]
            heads = [k async for k in conn.r.scan_iter(match=f"{conn.p}:*head*")]
            assert heads and await conn.r.delete(*heads) == len(heads)
        finally:
            await store.close()
    code, intact = await asyncio.to_thread(_verify, store_url.url)
    assert code == 0 and intact["intact"] is True and intact["checked"] == 5, intact
    await _cut_newest(store_url, target)
    code, broken = await asyncio.to_thread(_verify, store_url.url)
    assert code == 1 and broken["broken"]["chain"] == target, broken  # type: ignore[index]
