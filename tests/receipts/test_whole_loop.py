"""The Receipts page's whole loop on one machine, run as the page writes it: its shell blocks, line by line, from a
copy of ``examples/receipts`` (each `hitl` line as `python -m hitl`, each `python` line with this interpreter, on
free ports in place of 8700-8702). `hitl demo` puts the agent's card in the sandbox; support1 presses Approve
there, through the page's own endpoint; the agent gets its receipt from `hitl serve` and pays; the payment service
checks it with the published keys alone and spends it once: sent again, or left out, it pays nothing."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from tests.bot.conftest import ROOT
from tests.ports import free_port
from tests.processes import stop_process
from tests.waiting import eventually_sync, started_sync

PAGE = ROOT / "docs" / "pages" / "receipts.md"


def _blocks() -> list[list[str]]:
    """The section's shell blocks, each as its lines (comments left out)."""
    section = PAGE.read_text().split("## The whole loop on one machine", 1)[1].split("\n## ", 1)[0]
    assert "<!-- the whole loop: run as written by tests/receipts/test_whole_loop.py -->" in section
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [[line for line in b.splitlines() if line.strip() and not line.startswith("#")] for b in blocks]


class Terminal:
    """One terminal of the page: its working directory and exported variables; the command it leaves running."""

    def __init__(self, home: Path, ports: dict[str, str]) -> None:
        self.cwd, self.ports = home, ports
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
        for name in ("HITL_STORE", "HITL_CONFIG", "HITL_REVIEWER", "HITL_API_URL", "HITL_TOKEN", "HITL_NOW"):
            self.env.pop(name, None)
        self.env["SHOP_DB"] = str(home / "shop.db")
        self.log: IO[str] | None = None
        self.proc: subprocess.Popen[str] | None = None

    def ported(self, text: str) -> str:
        """``text`` with the test's free ports in place of the page's."""
        for page, ours in self.ports.items():
            text = text.replace(page, ours)
        return text

    def argv(self, line: str) -> list[str]:
        words = shlex.split(self.ported(line))
        if words[0] == "hitl":
            return [sys.executable, "-m", "hitl", *words[1:]]
        assert words[0] == "python", line
        return [sys.executable, *words[1:]]

    def run(self, lines: list[str], name: str) -> None:
        """Every line but the last runs to its end (exit 0); the last stays running, its output in a file."""
        for line in lines[:-1]:
            words = shlex.split(line)
            if words[0] == "cd":
                self.cwd = self.cwd / words[1]
            elif words[0] == "export":
                for pair in words[1:]:
                    key, _, value = self.ported(pair).partition("=")
                    self.env[key] = value
            else:
                done = subprocess.run(self.argv(line), cwd=self.cwd, env=self.env, capture_output=True, text=True)
                assert done.returncode == 0, (line, done.stdout, done.stderr)
        self.log = (self.cwd / f"{name}.log").open("w+")
        self.proc = subprocess.Popen(
            self.argv(lines[-1]), cwd=self.cwd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, text=True
        )

    def said(self) -> str:
        assert self.log is not None
        return Path(self.log.name).read_text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig=sig)
        if self.log is not None:
            self.log.close()


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - the sandbox on 127.0.0.1
        return dict(json.loads(resp.read()))


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - 127.0.0.1
            return int(resp.status), dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return int(exc.code), dict(json.loads(exc.read() or b"{}"))


def test_the_receipts_pages_whole_loop_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "receipts", tmp_path / "examples" / "receipts")
    ports = {page: str(free_port()) for page in ("8700", "8701", "8702")}
    sandbox, service, agent = _blocks()
    terminals = [Terminal(tmp_path, ports) for _ in range(3)]
    demo, payments, asking = terminals
    try:
        demo.run(sandbox, "demo")
        # The demo's last line of its start: the lines before it may reach the pipe first, on their own.
        started_sync(lambda: "runs until you stop it" in demo.said(), what="the demo's start")
        api = re.search(r"hitl serve's API: (\S+) ", demo.said())
        assert api is not None and api.group(1) == f"http://127.0.0.1:{ports['8701']}", demo.said()
        page = f"http://127.0.0.1:{ports['8700']}"
        payments.run(service, "payments")
        started_sync(lambda: "payments on" in payments.said(), what="the payment service")
        asking.run(agent, "agent")

        def card() -> dict[str, Any] | None:
            messages = _get(f"{page}/sandbox/state?user=U_SUPPORT1")["messages"]
            return next((m for m in messages if "V-1042" in json.dumps(m["blocks"]) and not m["thread_ts"]), None)

        found = eventually_sync(card, what="the agent's card in the sandbox")
        click = {"user": "U_SUPPORT1", "kind": "click", "channel": found["channel"], "ts": found["ts"]}
        assert _post(f"{page}/sandbox/act", {**click, "action_id": "hitl_approve"})[1]["ok"]  # support1 approves

        proc = asking.proc
        assert proc is not None
        eventually_sync(lambda: proc.poll() is not None, what="the agent to be paid and finish")
        assert proc.returncode == 0, asking.said()
        first, again = asking.said().split("the payment service says:", 1)[1].split("and to the same receipt again:")
        paid = json.loads(first)
        assert paid["paid"] is True and paid["receipt"].startswith("rct_"), asking.said()
        assert again.strip() == 'refused (409): {"error": "already_spent"}', asking.said()
        eventually_sync(lambda: "paid 120" in payments.said(), what="the payment service to pay")
        assert "paid 120 to V-1042, approved by ['U_SUPPORT1']" in payments.said()
        # Nothing without a receipt either; and it paid once.
        pay = f"http://127.0.0.1:{ports['8702']}/pay"
        assert _post(pay, {"to": "V-1042", "amount": 120}) == (403, {"error": "malformed"})
        assert payments.said().count("paid ") == 1
    finally:
        demo.stop(signal.SIGINT)  # Ctrl-C, as the page says
        for t in (payments, asking):
            t.stop()
