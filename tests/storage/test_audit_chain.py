"""The audit trail proves itself: `hitl audit verify` finds an edited SQLite row and an edited Redis list element."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.domain.models import DecisionKind
from engine.ports import Store
from engine.service import ApprovalService
from engine.storage import open_store
from engine.testing import FakeClock
from hitl.cli import app
from tests.engine.test_ask import CONFIG


async def _history(store: Store) -> str:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=FakeClock())
    ids = []
    for i in range(3):
        p = await svc.propose("refund", {"order_id": str(i), "amount": 10 + i}, session_id=f"s{i}")
        assert p.approval is not None
        ids.append(p.approval.id)
    await svc.decide(ids[1], "U_SUPPORT1", DecisionKind.APPROVE)
    await svc.decide(ids[2], "U_SUPPORT2", DecisionKind.REJECT, reason="no")
    return ids[1]


def _verify(url: str) -> tuple[int, dict[str, object]]:
    r = CliRunner().invoke(app, ["audit", "verify", "--json"], env={"HITL_STORE": url}, catch_exceptions=False)
    return r.exit_code, dict(json.loads(r.stdout))


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_verify_finds_the_first_broken_link(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/audit.db"
    else:
        url = f"{request.getfixturevalue('redis_url')}?prefix=chain{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    try:
        target = await _history(store)
    finally:
        await store.close()
    code, intact = await asyncio.to_thread(_verify, url)
    assert code == 0 and intact["intact"] is True and intact["checked"] == 5
    if backend == "sqlite":
        with sqlite3.connect(tmp_path / "audit.db") as db:  # the attacker drops the append-only guard first
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


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_verify_finds_an_approval_whose_whole_trail_was_deleted(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/audit.db"
    else:
        url = f"{request.getfixturevalue('redis_url')}?prefix=gone{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    try:
        target = await _history(store)
        if backend == "redis":
            await store.conn.r.delete(store.conn.audit_key(target))  # type: ignore[attr-defined]
    finally:
        await store.close()
    if backend == "sqlite":
        with sqlite3.connect(tmp_path / "audit.db") as db:
            db.execute("DROP TRIGGER audit_no_delete")
            db.execute("DELETE FROM audit WHERE approval_id = ?", (target,))
    code, broken = await asyncio.to_thread(_verify, url)
    where = broken["broken"]
    assert code == 1 and isinstance(where, dict) and where["chain"] == target
    assert where["reason"] == "the approval's audit entries are missing"
