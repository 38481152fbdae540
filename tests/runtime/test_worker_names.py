"""Every worker of every process has a name of its own: run ownership, execution claims and job consumption are
told apart by it, so a shared name would let one worker take another's run, claim or finished execution for its
own (the ask API's gates once all shared the framework's name)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from hitl.engine.agents.ask import Approvals
from hitl.engine.agents.gate import ToolGate
from hitl.engine.process.workers import worker_name
from hitl.engine.runtime.process import Runtime, RuntimeSettings, open_runtime
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock


def test_a_worker_name_says_what_it_is_where_and_is_never_repeated() -> None:
    names = {worker_name("cli") for _ in range(500)}
    assert len(names) == 500
    kind, host, pid, _ = next(iter(names)).split(":")
    assert (kind, host, pid) == ("cli", socket.gethostname(), str(os.getpid()))


async def test_runtimes_gates_and_askers_each_have_their_own(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "w.db")
    clock = FakeClock()
    try:
        one, two = (Runtime.build(store=store, clock=clock, config_path=None) for _ in range(2))
        # One name per runtime (its runs' owner, its claims' holder, its jobs' consumer), another per gate.
        assert one.lifecycle.worker_id == one.contexts.default.runner.worker_id
        service = ApprovalService.from_config(one.contexts.default.config, store=store, clock=clock)
        names = [one.lifecycle.worker_id, two.lifecycle.worker_id]
        names += [ToolGate(service).worker_id, ToolGate(service).worker_id]
        names += [Approvals(service).gate.worker_id, Approvals(service).gate.worker_id]
        assert len(set(names)) == len(names), names
        assert Approvals(service, framework="strands").gate.worker_id.startswith("strands:")
    finally:
        await store.close()


async def test_a_command_names_its_runtime_by_its_kind(tmp_path: Path) -> None:
    settings = RuntimeSettings(store_url=f"sqlite:///{tmp_path}/c.db", config_path=None)
    async with open_runtime(settings, kind="cli") as first, open_runtime(settings, kind="cli") as second:
        assert first.lifecycle.worker_id.startswith("cli:")
        assert first.lifecycle.worker_id != second.lifecycle.worker_id
