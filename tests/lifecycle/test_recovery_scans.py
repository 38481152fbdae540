"""Recovery pages through every paused run: a lost resume behind hundreds of older paused runs is still found."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import DecisionKind, Reviewer
from hitl.engine.runtime.process import Runtime
from hitl.engine.storage import open_store
from hitl.engine.testing import FakeClock, make_approval


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_lost_resume_behind_520_paused_runs_is_recovered(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path}/r.db"
        if backend == "sqlite"
        else f"{request.getfixturevalue('redis_url')}?prefix=r{tmp_path.name[-8:]}"
    )
    clock = FakeClock()
    rt = Runtime.build(store=open_store(url), clock=clock, config_path=None)
    try:
        for i in range(520):  # older paused runs whose approvals are still pending
            await rt.store.runs.save(
                f"run-{i:04d}", {"status": "paused", "waiting": f"apr_{i:010d}"}, expected_version=0, now=clock.now()
            )
        a = make_approval(now=clock.now(), session_id="run-zzzz")
        await rt.store.approvals.create(a)
        await rt.store.runs.save("run-zzzz", {"status": "paused", "waiting": a.id}, expected_version=0, now=clock.now())
        reviewer = Reviewer(id="U_SUPPORT1", roles=frozenset({"support"}))
        cmd = DecideCommand(
            approval_id=a.id,
            reviewer=reviewer,
            kind=DecisionKind.APPROVE,
            expected_version=1,
            expected_hash=a.action_hash,
        )
        await rt.store.approvals.decide(cmd, now=clock.now())  # the process "dies" before queuing the resume
        clock.advance(60)
        queued = 0
        for _ in range(4):  # 200 paused runs a round: the third round reaches it
            queued += await rt.lifecycle.recover()
        jobs = await rt.store.jobs.claim("w", kind="resume", limit=10, now=clock.now(), lease=60)
        assert queued == 1 and [j.payload for j in jobs] == [{"session_id": "run-zzzz", "approval_id": a.id}]
    finally:
        await rt.close()
