"""`hitl --help` and `hitl --version` load only what they show: a command imports what it uses when it runs, so
listing the commands loads no store, no runtime, no Slack, no server and no schema library (every CLI call, and
every test that starts one, paid for them); a command through `hitl serve`'s API (HITL_API_URL) loads no store,
runtime or Slack either; a local listing builds no workflow runner (nor, under a policy that declares none, a schema
validator), and `hitl serve` without receipts loads no joserfc. How long they take is measured in
bench/cli_bench.py, not here."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.config.hitl_yaml import load_config
from hitl.sandbox.server import start_emulator
from hitl.testing import FakeClock
from tests.api.conftest import TOKENS, sqlite_api
from tests.bot.conftest import CONFIG, serve_env, wait_healthy, workspace
from tests.cli.conftest import REFUND, ROOT, Cli
from tests.ports import free_port
from tests.processes import stop_process

PROBE = """
import json, runpy, sys
sys.argv = ["hitl", *sys.argv[1:]]
try:
    runpy.run_module("hitl", run_name="__main__")  # what `python -m hitl` runs
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

NOT_LOADED = (
    "hitl.engine.storage",  # every store: SQLite, Redis, PostgreSQL
    "hitl.engine.runtime",
    "hitl.api",
    "hitl.bot",
    "aiohttp",
    "slack_bolt",
    "slack_sdk",
    "redis",
    "asyncpg",
    "joserfc",
    "jsonschema",
)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["trust", "--help"], ["delegate", "give", "--help"], ["halt", "--help"]],
    ids=" ".join,
)
def test_listing_the_commands_loads_none_of_what_they_run_with(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert probe["code"] in (0, None), done.stderr
    assert ("hitl " if argv == ["--version"] else "Usage: ") in done.stdout
    assert [m for m in probe["modules"] if any(m == n or m.startswith(f"{n}.") for n in NOT_LOADED)] == []


WORK_PROBE = """
import asyncio, gc, json, runpy, sys
usual, seen = gc.get_threshold(), []
real_run = asyncio.run


def run(main, **kwargs):  # where run_command starts the command's work
    seen.append({"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()})
    return real_run(main, **kwargs)


asyncio.run = run
sys.argv = ["hitl", *sys.argv[1:]]
try:
    runpy.run_module("hitl", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "usual": usual, "seen": seen}), file=sys.stderr)
"""


def test_a_command_works_at_the_usual_collector_thresholds_with_what_it_loaded_frozen(tmp_path: Path) -> None:
    """hitl/cli/loading.py: the collector runs rarely while a command loads; its work (a server's, for as long as it
    runs) collects at the thresholds the process started with, what loading made set aside."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HITL_STORE": f"sqlite:///{tmp_path}/hitl.db", "HITL_CONFIG": ""}
    done = subprocess.run(
        [sys.executable, "-c", WORK_PROBE, "migrate", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert probe["code"] == 0, done.stderr
    [work] = probe["seen"]
    assert work["threshold"] == probe["usual"]
    assert work["frozen"] > 10_000  # the modules `hitl migrate` imported, and their classes and functions


REMOTE_NOT_LOADED = (
    "hitl.engine.storage.sqlite",  # the stores: through the API the command opens none
    "hitl.engine.storage.redis",
    "hitl.engine.storage.postgres",
    "hitl.engine.runtime.process",  # the runtime, its composed contexts and what runs workflows
    "hitl.engine.runtime.compose",
    "hitl.engine.runner",
    "hitl.engine.workflow",
    "hitl.bot",
    "slack_bolt",
    "slack_sdk",
    "aiohttp",
    "redis",
    "asyncpg",
    "aiosqlite",
    "sqlite3",
    "jsonschema",
)


async def _probe(*argv: str, env: dict[str, str], cwd: Path) -> tuple[dict[str, Any], str]:
    """PROBE run as a process, the test's event loop free meanwhile (it serves the API the command calls)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE,
        *argv,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return json.loads(err.decode().strip().splitlines()[-1]), out.decode()


async def test_a_command_through_the_api_loads_no_store_runtime_or_slack(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HITL_API_URL and HITL_TOKEN, `hitl pending`, `hitl resume` and a reviewer's command (`hitl reviewers`,
    an admin's) ask `hitl serve`: they import no store, no runtime, no workflow runner and no Slack (about a third of
    each such call's CPU was importing them, on every one of the suite's ~200 calls)."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    async with sqlite_api(tmp_path, clock) as api:
        body = {"session": "s1", "tool": "refund", "args": {"order_id": "1", "customer_id": "C-1", "amount": 120}}
        status, proposal = await api.call("POST", "/proposals", as_="agent", json={**body, "idempotency_key": "k1"})
        assert status == 200
        approval_id = proposal["approval"]["id"]
        env = {"HITL_API_URL": api.h.bot_url, "HITL_STORE": "sqlite:///nowhere/x.db"}
        decide = f"resume {approval_id} --approve --json"
        asked = {"pending --json": "sup1", decide: "sup1", "reviewers --json": "admin"}  # command: whose token
        for command, token in asked.items():
            argv = command.split()
            probe, out = await _probe(*argv, env={**env, "HITL_TOKEN": TOKENS[token][0]}, cwd=tmp_path)
            assert probe["code"] == 0, (argv, out)
            shown = json.loads(out)  # the API answered, and the command showed it
            assert approval_id in out if argv[0] != "reviewers" else shown["reviewers"][0]["reviewer"] == "U_SUPPORT1"
            loaded = [m for m in probe["modules"] if any(m == n or m.startswith(f"{n}.") for n in REMOTE_NOT_LOADED)]
            assert loaded == [], argv


RUNNER_NOT_LOADED = (
    "hitl.engine.runner.executor",  # the workflow runner and what it alone runs with: its step loop, the steps,
    "hitl.engine.runner.dispatch",  # the patterns, the agent backends and a run's checks
    "hitl.engine.runner.step_context",
    "hitl.engine.runner.steps",
    "hitl.engine.runner.patterns",
    "hitl.engine.runner.agent_backend",
    "hitl.engine.runner.checks",
)


@pytest.mark.parametrize("command", ["pending", "halts"])
def test_a_local_listing_builds_no_workflow_runner(command: str, cli: Cli, env: dict[str, str], tmp_path: Path) -> None:
    """Against the store (no HITL_API_URL), `hitl pending` and `hitl halts` compose the run contexts they read in,
    a paused run's own included, but never start or resume a run: they import no workflow runner (it was built for
    every context, some 65 ms of each such call's CPU). With `--json` they draw nothing for people either: no Rich
    (some 30 ms more)."""
    paused = cli("run", str(REFUND), "--var", "order_id=78291", "--var", "amount=75", "--json")
    assert paused.code == 4, paused.out
    approval_id = paused.json()["approval_id"]
    config = str(REFUND.parent / "hitl.yaml")  # a hitl.yaml found: no warning for people on stderr
    done = subprocess.run(
        [sys.executable, "-c", PROBE, command, "--json"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env, "HITL_CONFIG": config},
        capture_output=True,
        text=True,
        timeout=60,
    )
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert probe["code"] in (0, None), done.stderr
    assert (approval_id in done.stdout) is (command == "pending"), done.stdout  # it read the store and showed it
    assert [m for m in probe["modules"] if any(m == n or m.startswith(f"{n}.") for n in RUNNER_NOT_LOADED)] == []
    assert [m for m in probe["modules"] if m == "rich" or m.startswith("rich.")] == []


def test_a_local_listing_under_a_policy_without_schemas_loads_no_schema_library(
    cli: Cli, env: dict[str, str], tmp_path: Path
) -> None:
    """`hitl init`'s hitl.yaml declares no argument schema: `hitl pending` and `hitl halts` under it import neither
    jsonschema nor jsonschema_rs (they came with every policy, some 40 ms of each call's CPU); the first schema
    compiled imports them."""
    assert cli("init").code == 0 and cli("migrate").code == 0
    for command in ("pending", "halts"):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, command, "--json"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        probe = json.loads(done.stderr.strip().splitlines()[-1])
        assert probe["code"] in (0, None), done.stderr
        assert json.loads(done.stdout) in ({"pending": [], "count": 0, "waiting": None}, {"halts": []})
        assert [m for m in probe["modules"] if m.split(".")[0] in ("jsonschema", "jsonschema_rs")] == [], command


async def test_serve_without_receipts_loads_no_joserfc_and_no_workflow_runner(tmp_path: Path) -> None:
    """`hitl serve` whose hitl.yaml asks for no receipts (and no web sign-in) imports neither joserfc nor the
    cryptography under it, up to its first /healthz and after: the keys it would sign with and the ID tokens it
    would check are read where they are used (they cost every start some 60 ms of CPU). Nor, with no run to
    resume, the workflow runner: it is built by the first resume job."""
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=CONFIG)
    port = free_port()
    with (tmp_path / "serve.log").open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, "serve", "--port", str(port)], env=env, cwd=tmp_path, stdout=out, stderr=out
        )
    try:
        await wait_healthy(port, proc)
    finally:
        stopped = stop_process(proc, grace=20)
        await emulator.close()
    log = (tmp_path / "serve.log").read_text()
    probe = json.loads(log.strip().splitlines()[-1])
    assert stopped == 0 and probe["code"] in (0, None), log
    config = load_config(str(CONFIG))
    assert config.receipts is None and config.web is None  # the case this test is about
    assert [m for m in probe["modules"] if m.split(".")[0] in ("joserfc", "cryptography")] == []
    assert [m for m in probe["modules"] if any(m == n or m.startswith(f"{n}.") for n in RUNNER_NOT_LOADED)] == []
