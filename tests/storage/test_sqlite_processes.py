"""The SQLite store under real OS-process concurrency: several processes, one database file."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from pathlib import Path
from typing import Any

from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import DecisionKind, Reviewer, Status
from hitl.engine.errors import ClaimRefused, DecisionRefused, ErrorCode
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock, make_approval


def _worker(db: str, approval_id: str, version: int, digest: str, proc: int, start: Any, out: Any) -> None:
    async def go() -> dict[str, Any]:
        store = SqliteStore(db)
        await store.ledger.get("warm-up")  # open the connection before the gate
        start.wait()
        now = FakeClock().now()

        async def one(i: int) -> str:
            kind = DecisionKind.REJECT if (proc + i) % 2 else DecisionKind.APPROVE
            cmd = DecideCommand(
                approval_id=approval_id,
                reviewer=Reviewer(id=f"U_P{proc}_{i}", roles=frozenset({"support"})),
                kind=kind,
                expected_version=version,
                expected_hash=digest,
                reason="r",
            )
            try:
                await store.approvals.decide(cmd, now=now)
                return "won"
            except DecisionRefused as exc:
                return str(exc.code)

        async def claim(i: int) -> str:
            try:
                c = await store.ledger.claim("proc-claim", action_hash="h", holder=f"p{proc}-{i}", now=now, lease=60)
                return "acquired" if c.acquired else "replayed"
            except ClaimRefused as exc:
                return str(exc.code)

        decisions = await asyncio.gather(*(one(i) for i in range(50)))
        claims = await asyncio.gather(*(claim(i) for i in range(25)))
        await store.close()
        return {"decisions": decisions, "claims": claims}

    out.put(asyncio.run(go()))


def test_four_processes_deciding_one_approval(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    clock = FakeClock()
    a = make_approval(now=clock.now())

    async def setup() -> None:
        store = SqliteStore(db)
        await store.approvals.create(a)
        await store.close()

    asyncio.run(setup())
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(str(db), a.id, a.version, a.action_hash, p, start, out)) for p in range(4)
    ]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=90) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    decisions = [d for r in results for d in r["decisions"]]
    claims = [c for r in results for c in r["claims"]]
    assert decisions.count("won") == 1
    assert decisions.count(str(ErrorCode.ALREADY_DECIDED)) == 199
    assert claims.count("acquired") == 1 and claims.count(str(ErrorCode.CLAIM_IN_PROGRESS)) == 99

    async def check() -> None:
        store = SqliteStore(db)
        final = await store.approvals.get(a.id)
        assert final.status in (Status.APPROVED, Status.REJECTED) and final.version == 2
        log = await store.audit.entries(approval_id=a.id)
        assert [e.event for e in log].count("decided") == 1 and len(log) == 201
        await store.close()

    asyncio.run(check())
