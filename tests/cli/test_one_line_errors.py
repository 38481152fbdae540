"""Every failure is one line (`error: ... [code]`) and an exit code, never a traceback or a boxed panel: usage
errors, a busy port, and no Bolt warning on every start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def hitl(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m hitl ...` as a user runs it (not through Click's test runner, which has its own error printing)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "hitl", *args], env=full, cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nosuch"], "No such command 'nosuch'. (see `hitl --help`)"),
        (["resume", "apr_X", "--approve", "--reject"], "choose one decision, not approve and reject"),
        (["pending", "--limit", "0"], "--limit"),
        (["policy", "explain", "--bogus"], "(see `hitl policy explain --help`)"),
        (["show", "apr_A", "apr_B", "--json"], "--json shows one approval: run `hitl show ID --json` for each"),
    ],
)
def test_a_usage_error_is_one_line_with_its_code(args: list[str], says: str, tmp_path: Path) -> None:
    out = hitl(*args, cwd=tmp_path)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith("[usage]"), out.stderr
    assert says in lines[0] and "Traceback" not in out.stderr and "╭" not in out.stderr


def test_a_busy_port_is_one_line_and_serve_starts_without_a_bolt_warning(tmp_path: Path) -> None:
    env = {
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "secret",
        "SLACK_API_URL": "http://127.0.0.1:9/api/",
        "HITL_STORE": f"sqlite:///{tmp_path}/hitl.db",
        "HITL_CONFIG": "",
    }
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = hitl("serve", "--port", str(port), env=env, cwd=tmp_path)
    assert out.returncode == 1, out
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].endswith("[address_in_use]") and str(port) in errors[0], out.stderr
    assert "Traceback" not in out.stderr and "token` will be unused" not in out.stderr, out.stderr


def test_a_busy_demo_port_names_only_options_that_exist(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = hitl("demo", "--port", str(port), cwd=tmp_path)
    assert out.returncode == 1, out
    [error] = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert error.endswith("pick another address with --port/--api-port  [address_in_use]"), error  # no --host


@pytest.mark.parametrize(
    ("group", "commands"),
    [("sessions", ["list", "show"]), ("policy", ["explain"]), ("token", ["new"])],
)
def test_a_group_without_its_command_says_what_to_type(group: str, commands: list[str], tmp_path: Path) -> None:
    out = hitl(group, cwd=tmp_path)
    assert out.returncode == 2, out
    last = out.stderr.strip().splitlines()[-1]  # after the group's help: what was missing, and what to type
    expected = ", ".join(f"`hitl {group} {c}`" for c in commands)
    assert last == f"error: `hitl {group}` needs a command: {expected} (see `hitl {group} --help`)  [usage]", last
