"""`hitl demo` (what `make demo` runs): the sandbox comes up; --scripted and --cli tell the story headless."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.cli.conftest import ROOT
from tests.processes import stop_process
from tests.refund_config import write_refund_config
from tests.waiting import eventually_sync, started_sync


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    for name in ("HITL_STORE", "HITL_CONFIG", "HITL_REVIEWER", "HITL_NOW", "SHOP_DB"):
        env.pop(name, None)
    return env


def _passed(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """`hitl demo MODE` run headless to its end in ``tmp_path``, which must exit 0: what it printed."""
    out = subprocess.run(
        [sys.executable, "-m", "hitl", "demo", mode],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def test_scripted_sandbox_demo_passes(tmp_path: Path) -> None:
    out = _passed(tmp_path, "--scripted")
    text = out.stdout
    for expected in (
        "hostile note inert",
        "You are not a reviewer",
        "Approved and done",
        "1 of 2 finance approvals",
        "already voted",
        "less than or equal to the minimum of 0",
        "superseded",
        "waiting for you",
        "For agent:chat only: approves this call, and lets its later refund calls in session chat-42 run",
        "the next refund in chat-42: ran without a card",
        "refund ran without review",
        "Flagged: check_stock   audit yield: 1.0",  # a spot check flagged
        "That was a practice check: hitl planted a defect (10,000 mugs). It was approved: the defect was missed.",
        "a new refund run: paused (halted: halted by U_ADMIN",  # the stop switch
        "1 paused run(s) go on.",
        "demo passed",
    ):
        assert expected in text, expected
    assert "jane@example.com" not in text
    # What a person sees in Slack, not the wire markup: no entities, no emoji codes, no mrkdwn asterisks.
    assert "&lt;" not in text and "&gt;" not in text and ":no_entry:" not in text and ":ballot_box" not in text
    assert "⛔ You are not a reviewer for this request: it needs support." in text
    assert "<!channel> *APPROVED by Security*" in text  # the hostile note, shown literally as a reviewer sees it


def test_cli_walkthrough_demo(tmp_path: Path) -> None:
    out = _passed(tmp_path, "--cli")
    for expected in ("escalate", "not_eligible", "self_approval", "completed", "already_decided", "executed"):
        assert expected in out.stdout, expected
    assert not (tmp_path / ".hitl").exists()


@contextmanager
def interactive_demo(tmp_path: Path, *extra: str) -> Iterator[str]:
    """`hitl demo` (interactive) as a process; yields the sandbox's URL, then stops it with Ctrl-C (exit 0)."""
    log = (tmp_path / "demo.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitl", "demo", "--port", "0", *extra],
        cwd=tmp_path,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def printed() -> str | None:
            # Read once the start's last line is out: the lines before it can reach the file alone.
            text = (tmp_path / "demo.log").read_text()
            m = re.search(r"(http://127\.0\.0\.1:\d+)/", text)
            return m.group(1) if m and "runs until you stop it" in text else None

        url = started_sync(printed, what="the demo's URL")
        assert url, (tmp_path / "demo.log").read_text()
        yield url
    finally:
        code = stop_process(proc, sig=signal.SIGINT)  # Ctrl-C, even from a launcher that ignores SIGINT
        log.close()
    assert code == 0


def test_interactive_demo_serves_the_sandbox_until_interrupted(tmp_path: Path) -> None:
    with interactive_demo(tmp_path) as url:
        with urllib.request.urlopen(f"{url}/", timeout=10) as resp:
            page = resp.read().decode()
            assert resp.headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert "hitl sandbox" in page
        # hitl serve's API beside it, printed, where an agent, the CLI or a protected service reaches the same bot.
        printed = (tmp_path / "demo.log").read_text()
        api = re.search(r"hitl serve's API: (http://127\.0\.0\.1:\d+) \(HITL_API_URL", printed)
        assert api and "It runs until you stop it: Ctrl-C to stop." in printed, printed
        request = urllib.request.Request(f"{api.group(1)}/api/v1/approvals", headers={"Authorization": "Bearer x"})
        try:
            urllib.request.urlopen(request, timeout=10)
        except urllib.error.HTTPError as exc:  # the API itself: a token it does not know is refused
            assert exc.code == 401 and json.loads(exc.read())["error"]["code"] == "unauthorized"
        else:
            raise AssertionError("the API answered an unknown token")

        def state() -> dict[str, Any]:
            with urllib.request.urlopen(f"{url}/sandbox/state?user=U_SUPPORT1", timeout=10) as resp:
                return dict(json.loads(resp.read()))

        assert [c["name"] for c in state()["channels"]] == ["finance-approvals", "general", "refund-approvals"]
        # Three workflow refunds, and the chat agent's first refund of the Trust story.
        eventually_sync(lambda: sum(c["count"] for c in state()["channels"]) == 4, what="four cards waiting")


def test_the_sandbox_shows_your_own_policy_and_store(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    text = (ROOT / "examples" / "refund" / "hitl.yaml").read_text().replace("#refund-approvals", "#my-approvals")
    write_refund_config(config, text)
    store = tmp_path / "mine.db"
    with interactive_demo(tmp_path, "--store", f"sqlite:///{store}", "--config", str(config)) as url:
        with urllib.request.urlopen(f"{url}/sandbox/state?user=U_SUPPORT1", timeout=10) as resp:
            state = json.loads(resp.read())
        assert "my-approvals" in [c["name"] for c in state["channels"]]  # the channel your hitl.yaml names
    with sqlite3.connect(store) as db:  # the approvals stayed in your store
        assert db.execute("SELECT count(*) FROM approvals").fetchone()[0] == 3
