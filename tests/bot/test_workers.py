"""`hitl serve --workers N`: N processes on one port (SO_REUSEPORT) and one store, stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from hitl.engine.storage import open_store
from hitl.sandbox.server import start_emulator
from tests.bot.conftest import CONFIG, serve_env, spawn_serve, wait_healthy, workspace
from tests.ports import free_port
from tests.processes import stopped
from tests.waiting import eventually, started


@asynccontextmanager
async def two_workers(tmp_path: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], int]]:
    """`hitl serve --workers 2` on a free port, healthy; its supervisor process and the port."""
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=CONFIG)
    port = free_port()
    # A process group of its own: a supervisor that had to be killed cannot stop its workers, the group can.
    supervisor = spawn_serve(env, tmp_path, port, "--workers", "2", start_new_session=True)
    try:
        await wait_healthy(port, supervisor)
        yield supervisor, port
    finally:
        await stopped(supervisor, grace=20)  # SIGTERM: it stops its workers (killed after the grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(supervisor.pid, signal.SIGKILL)  # any worker a killed supervisor left behind
        await emulator.close()


async def both_answering(port: int) -> set[str]:
    """Wait until both workers on ``port`` have answered ``/healthz``: their replica names."""
    replicas: set[str] = set()
    # A new connection each time: the kernel spreads connections, not requests, among the workers.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:

        async def both_answered() -> bool:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                if resp.status == 200:
                    replicas.add((await resp.json())["replica"])
            return len(replicas) == 2

        await started(both_answered, what="both workers to answer", interval=0.01)
    return replicas


async def test_workers_share_the_port_and_stop_together(tmp_path: Path) -> None:
    async with two_workers(tmp_path) as (supervisor, port):
        await both_answering(port)  # the second worker may still be starting
        supervisor.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(supervisor.wait, 30) == 0
        refused = 0
        for _ in range(3):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
            except OSError:
                refused += 1
        assert refused == 3  # every worker stopped with the supervisor


async def test_a_worker_that_dies_takes_the_set_down_for_the_orchestrator_to_restart(tmp_path: Path) -> None:
    async with two_workers(tmp_path) as (supervisor, _):
        children = Path(f"/proc/{supervisor.pid}/task/{supervisor.pid}/children").read_text().split()
        assert len(children) == 2
        os.kill(int(children[0]), signal.SIGKILL)
        assert await asyncio.to_thread(supervisor.wait, 30) != 0  # the set went down, saying so
        assert not Path(f"/proc/{children[1]}").exists()  # the other worker was stopped and reaped
        assert "exited with -9; stopping the others" in (tmp_path / "serve.log").read_text()


def test_workers_are_for_http_not_socket_mode(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hitl", "serve", "--socket", "--workers", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "Socket Mode runs in one process" in out.stderr


async def test_sighup_to_the_supervisor_reloads_every_worker(tmp_path: Path) -> None:
    async with two_workers(tmp_path) as (supervisor, port):
        replicas = await both_answering(port)  # a worker still starting would die of the signal
        supervisor.send_signal(signal.SIGHUP)

        async def reloaded() -> set[str] | None:
            store = open_store(f"sqlite:///{tmp_path}/hitl.db")
            try:
                actors = {e.actor for e in await store.audit.entries() if e.event == "config.reloaded"}
            finally:
                await store.close()
            return actors if len(actors) == 2 else None

        assert await eventually(reloaded, what="both workers' reloads") == {f"reload:{r}" for r in replicas}
        assert supervisor.poll() is None  # the supervisor passed it on, and serves on
