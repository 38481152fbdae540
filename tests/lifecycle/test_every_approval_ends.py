"""Every approval ends: a review gate's approval is closed when its step goes on, so once a finished run is past the
retention horizons nothing of it is left in any table or key, on both stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.domain.models import DecisionKind, Reviewer, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.retention import DAY, Retention
from hitl.engine.domain.runs import RunStatus
from hitl.engine.runtime.process import Runtime
from hitl.engine.storage import open_store
from hitl.engine.storage.redis import RedisStore
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock

FLOWS = Path(__file__).parent / "flows"


async def _everything(store: object) -> str:
    """Every row of every table (SQLite) or every key's value (Redis), as one text to search. What a store holds,
    not how its files lay it out: deleted rows in SQLite's free pages and entries deleted from a Redis stream's
    node are not content (VACUUM and Redis reclaim them)."""
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return json.dumps({t: db.execute(f"SELECT * FROM {t}").fetchall() for t in tables}, default=str)  # noqa: S608
    assert isinstance(store, RedisStore)
    r, out = store.conn.r, {}
    read: dict[str, Any] = {
        "string": r.get,
        "hash": r.hgetall,
        "list": lambda k: r.lrange(k, 0, -1),
        "set": r.smembers,
        "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
        "stream": r.xrange,
    }
    async for key in r.scan_iter(match=f"{store.prefix}:*"):
        out[str(key)] = repr(await read[str(await r.type(key))](key))
    return json.dumps(out)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_nothing_of_a_finished_run_outlives_the_horizons(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_TEST_LEDGER", str(tmp_path / "ledger.jsonl"))
    monkeypatch.syspath_prepend(str(FLOWS))
    url = (
        f"sqlite:///{tmp_path}/r.db"
        if backend == "sqlite"
        else f"{request.getfixturevalue('redis_url')}?prefix=end{tmp_path.name[-8:]}"
    )
    clock = FakeClock()
    rt = Runtime.build(store=open_store(url), clock=clock, config_path=None)
    try:
        flow = load_workflow(FLOWS / "gate_then_pay.yaml")
        paused = await rt.lifecycle.start(flow, {})
        assert paused.status is RunStatus.PAUSED and paused.approval is not None
        gate = paused.approval
        support = Reviewer(id="U_SUPPORT1", roles=frozenset({"support"}))
        after_gate = await rt.lifecycle.decide(DecideRequest(gate.id, support, DecisionKind.APPROVE), resume="inline")
        pay = after_gate.run.approval if after_gate.run else None
        assert pay is not None
        for who in ("U_FIN1", "U_FIN2"):
            done = await rt.lifecycle.decide(
                DecideRequest(pay.id, Reviewer(id=who, roles=frozenset({"finance"})), DecisionKind.APPROVE),
                resume="inline",
            )
        assert done.run is not None and done.run.status is RunStatus.COMPLETED
        # The gate's approval ended when its step went on: a final state, like the payment's.
        assert (await rt.store.approvals.get(gate.id)).status is Status.EXECUTED
        assert (await rt.store.approvals.get(pay.id)).status is Status.EXECUTED
        session = paused.session_id
        assert session in await _everything(rt.store)
        clock.advance(401 * DAY)  # past both horizons (records 30 days, audit 400)
        retention = Retention(records=30 * DAY, audit=400 * DAY)
        while (await rt.store.purger.purge(retention, now=clock.now())).total:
            pass
        left = await _everything(rt.store)
        for trace in (session, gate.id, pay.id):
            assert trace not in left, f"{trace} outlived the horizons: {left[max(0, left.find(trace) - 300) :][:600]}"
        assert (await rt.store.audit.verify())[1] is None
    finally:
        await rt.close()
