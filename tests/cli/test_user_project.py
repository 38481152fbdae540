"""A user's project with its own ``bot.py``, ``engine.py``, ``engine/`` and ``helpers.py`` beside its workflow:
every command works from there, the user's tools import their own modules, and ours never meet theirs.

Run as a user runs them: real processes started in the project's folder, the console script and ``python -m hitl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hitl.sandbox.server import start_emulator
from tests.bot.conftest import serve_env, serve_process, workspace
from tests.mcp.conftest import make_shop, text_of
from tests.waiting import eventually

HITL = Path(sys.executable).parent / "hitl"

TOOLS = """
import bot
import engine
import helpers


def greet(name: str) -> dict[str, str]:
    import late  # an import at call time finds the tools' folder too

    return {"bot": bot.WHO, "engine": engine.WHO, "text": helpers.greet(name), "late": late.WHO}


def wave(name: str) -> dict[str, str]:
    return {"waved": helpers.greet(name)}
"""

WORKFLOW = """
name: greetings
vars: {name: null}
tools:
  greet: {function: "tools:greet"}
  wave: {function: "tools:wave"}
steps:
  - id: greet
    tool: greet
    args: {name: "{{ vars.name }}"}
  - id: wave
    tool: wave
    args: {name: "{{ vars.name }}"}
"""

CONFIG = """
requester: agent:greeter
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  allowed_tools: [greet]
  tools: {wave: {tier: approve, role: support}}
"""


def make_project(folder: Path) -> Path:
    """The files a user keeps beside their workflow, named as our internal packages once were."""
    folder.mkdir(exist_ok=True)
    (folder / "bot.py").write_text('WHO = "the user\'s bot"\n')
    (folder / "engine.py").write_text('WHO = "the user\'s engine module"\n')
    (folder / "engine").mkdir(exist_ok=True)
    (folder / "engine" / "__init__.py").write_text('WHO = "the user\'s engine package"\n')
    (folder / "helpers.py").write_text('def greet(name: str) -> str:\n    return f"hello {name}"\n')
    (folder / "late.py").write_text('WHO = "imported late"\n')
    (folder / "tools.py").write_text(TOOLS)
    (folder / "workflow.yaml").write_text(WORKFLOW)
    (folder / "hitl.yaml").write_text(CONFIG)
    return folder


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HITL_") and k != "PYTHONPATH"}
    return {**env, "HITL_STORE": f"sqlite:///{folder}/hitl.db", "COLUMNS": "200"}


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.mark.parametrize("command", [[str(HITL)], [sys.executable, "-m", "hitl"]], ids=["hitl", "python -m hitl"])
def test_run_and_resume_use_the_users_own_modules(project: Path, command: list[str]) -> None:
    assert _run(project, *command, "--version").returncode == 0
    checked = _run(project, *command, "validate", "workflow.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    paused = _run(project, *command, "run", "workflow.yaml", "--var", "name=Dana", "--json")
    assert paused.returncode == 4, paused.stdout + paused.stderr  # waits for a person on `wave`
    out = json.loads(paused.stdout)
    session, approval = out["session_id"], out["approval"]["id"]

    done = _run(project, *command, "resume", session, "--approve", "--as", "U_SUPPORT1", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = json.loads(done.stdout)["outputs"]
    assert outputs["greet"] == {
        "bot": "the user's bot",
        "engine": "the user's engine package",  # a package wins over a module of the same name, as in Python
        "text": "hello Dana",
        "late": "imported late",
    }
    assert outputs["wave"] == {"waved": "hello Dana"}
    assert approval.startswith("apr_")


def test_a_tool_module_that_cannot_import_its_neighbour_says_which(project: Path) -> None:
    (project / "helpers.py").unlink()
    out = _run(project, str(HITL), "validate", "workflow.yaml")
    assert out.returncode != 0
    assert "No module named 'helpers'" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_the_demo_runs_from_a_users_project(project: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hitl", "demo", "--scripted"],
        cwd=project,
        env=_env(project),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "demo passed" in out.stdout


async def test_serve_runs_from_a_users_project_and_resumes_with_their_modules(project: Path) -> None:
    import aiohttp

    from hitl.api import token_hash

    token = "tok-user-project"
    spec = f"{{name: sup1, sha256: {token_hash(token)}, reviewer: U_SUPPORT1, scopes: [decide]}}"
    (project / "hitl.yaml").write_text(f"{CONFIG}api:\n  tokens:\n    - {spec}\n")
    paused = _run(project, str(HITL), "run", "workflow.yaml", "--var", "name=Lee", "--json")
    assert paused.returncode == 4, paused.stdout + paused.stderr
    session, approval = json.loads(paused.stdout)["session_id"], json.loads(paused.stdout)["approval"]

    state = workspace()
    emulator = await start_emulator(state)
    try:
        env = serve_env(state, emulator, store=_env(project)["HITL_STORE"], config=project / "hitl.yaml")
        env.pop("PYTHONPATH")
        async with serve_process(env, project) as port, aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}/api/v1/approvals/{approval['id']}/decisions"
            body = {"decision": "approve", "expected_version": approval["version"]}
            body["action_hash"] = approval["action_hash"]
            async with http.post(url, json=body, headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 200, await r.text()

            def completed() -> bool:  # hitl serve resumes the run as a durable job, with the user's modules
                shown = _run(project, str(HITL), "sessions", "show", session, "--json").stdout
                return bool(json.loads(shown)["status"] == "completed")

            await eventually(completed, what="the run to complete in hitl serve")
    finally:
        await emulator.close()


async def test_the_mcp_gateway_runs_from_a_users_project(tmp_path: Path) -> None:
    shop = make_shop(make_project(tmp_path), wait="20s")
    try:
        async with shop.client() as client:
            assert text_of(await client.call_tool("look_up_order", {"order_id": "2"})) == "order 2: shipped"
    finally:
        await shop.store.close()
