"""The README's and the documentation's examples run as written (the README is short; the rest lives in the
site's pages, docs/pages, which these tests read as a reader would)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.refund_config import write_refund_config

ROOT = Path(__file__).resolve().parents[1]


def documentation(*pages: str) -> str:
    """The text of the named pages of the site (docs/pages), or of the README and every page when none is named."""
    if pages:
        return "".join((ROOT / "docs" / "pages" / page).read_text() for page in pages)
    return (ROOT / "README.md").read_text() + "".join(p.read_text() for p in sorted((ROOT / "docs/pages").glob("*.md")))


def run_python(script: str | Path, *, cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """A script run as a reader of the README would run it (with this checkout importable)."""
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_readme_python_api_example_runs(tmp_path: Path) -> None:
    text = documentation()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "asyncio.run(main())" in b)
    script = tmp_path / "example.py"
    script.write_text(block)
    out = run_python(str(script), cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "self_approval" in out.stdout and "approved 2" in out.stdout
    assert "[email]" in out.stdout and "jane@example.com" not in out.stdout
    assert "decided U_SUPPORT1 ok" in out.stdout


@pytest.mark.slow
def test_readme_agent_examples_run(tmp_path: Path) -> None:
    """Every framework example the README lists runs offline and runs the reviewer's edit, once."""
    text = documentation()
    commands = re.findall(r"^python (examples/agents/\w+\.py)$", text, re.M)
    assert sorted(commands) == [
        "examples/agents/langgraph_refund.py",
        "examples/agents/openai_agents_refund.py",
        "examples/agents/pydantic_ai_refund.py",
        "examples/agents/strands_refund.py",
    ]
    for script in commands:
        out = run_python(str(ROOT / script), cwd=tmp_path, timeout=120)
        assert out.returncode == 0, (script, out.stderr)
        assert out.stdout.count("effect: refunded") == 1, (script, out.stdout)
        assert "effect: refunded 60 on order 78291" in out.stdout, (script, out.stdout)
        assert "model: refunded 60 on order 78291" in out.stdout, (script, out.stdout)


async def test_readme_api_walkthrough_runs_against_hitl_serve(tmp_path: Path) -> None:
    """The curl walkthrough, run by bash as written, against a real `hitl serve` (emulated Slack, SQLite)."""
    import asyncio

    from hitl.api import token_hash
    from hitl.sandbox.server import start_emulator
    from tests.bot.conftest import serve_env, serve_process, workspace
    from tests.waiting import eventually

    text = documentation()
    block = re.search(r"<!-- api-walkthrough -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None
    tokens = {
        "AGENT_TOKEN": ("riley", "agent:riley", "[propose, read]"),
        "REVIEWER_TOKEN": ("sup", "U_SUPPORT1", "[read, decide]"),
    }
    config = tmp_path / "hitl.yaml"
    lines = [(ROOT / "examples/refund/hitl.yaml").read_text(), "api:", "  tokens:"]
    for env_name, (name, reviewer, scopes) in tokens.items():
        lines.append(
            f"    - {{name: {name}, sha256: {token_hash(env_name)}, reviewer: '{reviewer}', scopes: {scopes}}}"
        )
    write_refund_config(config, "\n".join(lines) + "\n")
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=config)
    try:
        async with serve_process(env, tmp_path) as port:
            walk = await asyncio.create_subprocess_exec(
                "bash",
                "-euo",
                "pipefail",
                "-c",
                block.group(1),
                cwd=tmp_path,
                env={**env, "HITL_API_URL": f"http://127.0.0.1:{port}", **{k: k for k in tokens}},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(walk.communicate(), 120)
            assert walk.returncode == 0, (out.decode(), err.decode(), (tmp_path / "serve.log").read_text()[-3000:])
            printed = out.decode().split()
            assert printed[:4] == ["pending", "approved", "409", "approved"], out.decode()
            assert json.loads(printed[4]) == {"order_id": "78291", "customer_id": "C-1", "amount": 120}
            assert printed[5:] == ["executed"]
            await eventually(
                lambda: any("refund" in m.text for m in state.messages),
                what="the card `hitl serve` posts for the agent's proposal",
            )
    finally:
        await emulator.close()


def test_readme_webhook_verification_snippet_agrees_with_the_signer() -> None:
    import time

    from hitl.api.webhooks import sign

    text = documentation()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def verified(" in b)
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - our own README, checked here
    verified = scope["verified"]
    body, stamp = b'{"id":"approval.created:apr_1"}', str(int(time.time()))
    headers = {"X-Hitl-Timestamp": stamp, "X-Hitl-Signature": sign("s3cret", stamp, body)}
    assert verified("s3cret", headers, body)  # type: ignore[operator]
    assert not verified("other", headers, body)  # type: ignore[operator]
    assert not verified("s3cret", headers, body + b"x")  # type: ignore[operator]
    old = str(int(time.time()) - 3600)
    assert not verified(
        "s3cret", {**headers, "X-Hitl-Timestamp": old, "X-Hitl-Signature": sign("s3cret", old, body)}, body
    )  # type: ignore[operator]


def test_readme_mcp_example_runs(tmp_path: Path) -> None:
    """The MCP gateway example, as the README says to run it: a client, `hitl mcp`, the shop's MCP server."""
    text = documentation()
    assert re.search(r"^python examples/mcp/desktop_client.py$", text, re.M)
    out = run_python(str(ROOT / "examples/mcp/desktop_client.py"), cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "tools: look_up_order, refund"
    assert lines[1] == "lookup: order 78291: shipped, paid 120"
    assert lines[2].startswith("card: refund {'order_id': '78291', 'amount': 120}")
    assert lines[3:] == ["refund: refunded 120 on order 78291", "effects: 78291 120"]  # once, after the approval


def test_readme_temporal_example_runs(tmp_path: Path) -> None:
    """The Temporal example as the README says to run it (it starts its own dev server on 127.0.0.1)."""
    text = documentation()
    assert re.search(r"^python examples/temporal/refund_workflow.py$", text, re.M)
    out = run_python(str(ROOT / "examples/temporal/refund_workflow.py"), cwd=tmp_path, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "card: refund 120 on order 78291",
        "effect: refunded 120 on order 78291 (key call:apr_…)",
        "workflow: refunded 120 on order 78291",
    ]


@pytest.mark.slow
def test_readme_python_type_checks_as_a_user_writes_it(tmp_path: Path) -> None:
    """The README's complete Python programs pass `mypy --strict` against hitl's typed packages, as in a user's
    project (the ask/guard example, the API walkthrough, the webhook check)."""
    text = documentation()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    wanted = {"async def handle(": "ask.py", "asyncio.run(main())": "api.py", "def verified(": "webhook.py"}
    files = []
    for marker, name in wanted.items():
        (block,) = (b for b in blocks if marker in b)
        (tmp_path / name).write_text(block)
        files.append(str(tmp_path / name))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            # hitl's own modules are judged by its own `make typecheck`, as an installed package's would be: only
            # the README's code reports errors here.
            "--follow-imports=silent",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy"),
            *files,
        ],
        cwd=tmp_path,
        # The editable install's import hook is invisible to mypy: point it at the sources the wheel is built from.
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return {str(k) for k in value} | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_readme_documents_every_workflow_key_with_valid_examples() -> None:
    """The README's workflow format names every key a workflow file accepts, in examples that validate."""
    import yaml
    from pydantic import BaseModel

    from hitl.agent_backends.scripted import Script
    from hitl.engine.workflow import agents as agent_spec
    from hitl.engine.workflow import patterns as pattern_spec
    from hitl.engine.workflow import steps as step_spec
    from hitl.engine.workflow.definition import Workflow, problems, union_tag

    text = documentation("workflows.md")
    blocks = re.findall(r"```yaml\n(.*?)```", _section(text, "## Writing a workflow", "## CLI reference"), re.S)
    documents = [yaml.safe_load(b) for b in blocks]
    documented = set().union(*(_keys(d) for d in documents))
    models: list[type[BaseModel]] = [Workflow]
    for module in (step_spec, agent_spec, pattern_spec):
        models += [m for m in vars(module).values() if isinstance(m, type) and issubclass(m, step_spec.Spec)]
    expected = {f.alias or name for m in models for name, f in m.model_fields.items()}
    assert expected - documented == set(), "keys the README's workflow format does not show"

    reference = next(d for d in documents if d.get("name") == "research-report")
    assert problems(Workflow.model_validate(reference, context={"all_problems": True})) == []
    patterns = [d["pattern"] for d in documents if set(d) == {"pattern"}]
    assert sorted(p["type"] for p in patterns) == sorted(
        ["chain", "workflow", "parallel", "routing", "evaluator_optimizer", "orchestrator_workers", "graph"]
    )
    for pattern in patterns:  # each pattern snippet is a valid workflow with the reference's agents
        spec = {**{k: v for k, v in reference.items() if k != "steps"}, "pattern": pattern}
        assert problems(Workflow.model_validate(spec, context={"all_problems": True})) == [], pattern["type"]
        assert union_tag(pattern) == pattern["type"]
    script = next(d for d in documents if "researcher" in d and "name" not in d)
    Script.model_validate({"agents": {k: [c if "turns" in c else {"turns": c} for c in v] for k, v in script.items()}})


def test_the_readmes_sample_output_of_hitl_run_is_what_it_prints(tmp_path: Path) -> None:
    """The quick start's `hitl run`, run as written after its `hitl init`: every line the README shows under it is a
    line it prints (ids and hashes as "…", runs of spaces as one; a "..." line stands for lines left out)."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("hitl init --example refund refund") :]
    block = block[: block.index("```")]
    command = next(line for line in block.splitlines() if line.startswith("hitl run "))
    after = block[block.index(command) :].splitlines()[1:]  # what the README shows it printing
    shown = [line[2:] for line in after if line.startswith("# ") and not line.startswith("# ...")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "SHOP_DB": str(tmp_path / "shop.db")}
    env |= {"HITL_STORE": f"sqlite:///{tmp_path / 'hitl.db'}", "HITL_CONFIG": ""}
    hitl = [sys.executable, "-m", "hitl"]
    subprocess.run([*hitl, "init", "--example", "refund", "refund"], cwd=tmp_path, env=env, check=True, timeout=60)
    ran = subprocess.run(
        [*hitl, *command.split("#")[0].split()[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 4, ran.stderr

    def plain(line: str) -> str:
        line = re.sub(r"(apr|ses)_[0-9A-Z]{10}", r"\1_…", line)
        return " ".join(re.sub(r"hash [0-9a-f]{16}", "hash …", line).split())

    printed = {plain(line) for line in ran.stdout.splitlines()}
    assert shown and [line for line in shown if plain(line) not in printed] == [], ran.stdout


SERVERS = {
    "redis": ("redis-server",),
    "postgres": ("PostgreSQL",),
    "chromium": ("Chromium",),
    "tools": ("curl", "jq"),
    "node": ("Node.js", "jose"),
}
"""What each Makefile target `make pytest` depends on installs (scripts/ensure-*), as the README names it."""


def test_the_readme_names_every_server_make_test_installs() -> None:
    """Each README paragraph on what `make test` does names every server and tool it makes sure of: a reader
    without PostgreSQL learns it from the README, not from a failing test."""
    makefile = (ROOT / "Makefile").read_text()
    [needs] = re.findall(r"^pytest: \$\(STAMP\) (.+)$", makefile, re.M)
    assert set(needs.split()) == set(SERVERS)  # a new server for the tests gets its names here, and in the README
    for target in SERVERS:
        assert re.search(rf"^{target}:\n\t@scripts/ensure-", makefile, re.M), target
    paragraphs = [p for p in (ROOT / "README.md").read_text().split("\n\n") if p.startswith("`make test`")]
    assert len(paragraphs) == 2, paragraphs  # what it installs (the demo section), and what it runs (Contributing)
    for paragraph in paragraphs:
        said = " ".join(paragraph.split())
        missing = [name for names in SERVERS.values() for name in names if name not in said]
        assert missing == [], (missing, said[:80])


def test_make_demo_takes_the_port_the_readme_names() -> None:
    """`make demo PORT=8800` (as the README says) runs the sandbox on 8800; without PORT, on 8700."""
    for given, port in ((["PORT=8800"], "8800"), ([], "8700")):
        planned = subprocess.run(["make", "-n", "demo", *given], cwd=ROOT, capture_output=True, text=True, check=True)
        assert planned.stdout.splitlines()[-1] == f".venv/bin/hitl demo --port {port}", planned.stdout
    assert "`make demo PORT=8800`" in (ROOT / "README.md").read_text()
