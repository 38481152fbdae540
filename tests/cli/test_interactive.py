"""`hitl run --interactive` through a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pexpect

from hitl.engine.domain.decide import NO_VIEW
from hitl.engine.domain.presentation import digest_of
from tests.cli.conftest import REFUND, ROOT


def spawn(tmp_path: Path, *args: str) -> pexpect.spawn[str]:
    env = {
        **os.environ,
        "HITL_STORE": f"sqlite:///{tmp_path}/hitl.db",
        "SHOP_DB": str(tmp_path / "shop.db"),
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "160",
        "TERM": "dumb",
    }
    env.pop("HITL_CONFIG", None)
    return pexpect.spawn(
        sys.executable,
        [
            "-m",
            "hitl",
            "run",
            str(REFUND),
            "--var",
            "order_id=78291",
            "--var",
            "amount=75",
            "--var",
            "note=call me at 030 1234 5678",
            "--interactive",
            *args,
        ],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=60,
    )


def _ends(child: pexpect.spawn[str], said: str, code: int) -> None:
    """The run, answered, says ``said`` and exits with ``code`` (0 completed, 3 rejected, 4 paused)."""
    child.expect(said)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == code


def test_interactive_evidence_then_approve(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--as", "U_SUPPORT1")
    child.expect(r"\[a\]pprove, \[r\]eject, \[m\]odify, \[e\]vidence, \[d\]efer")
    child.sendline("e")
    child.expect("evidence \\(untrusted, redacted\\)")
    child.expect(r"\[phone\]")
    child.expect(r"\[d\]efer")
    child.sendline("a")
    _ends(child, "completed", 0)
    # The prompt showed the approval: the decision names the view it showed, and the audit keeps it.
    with sqlite3.connect(tmp_path / "hitl.db") as db:
        [(digest, view, detail)] = db.execute("SELECT view_digest, view, detail FROM audit WHERE event = 'decided'")
    assert digest == digest_of(json.loads(view)) and NO_VIEW not in detail


def test_interactive_modify_invalid_then_reject(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--as", "U_SUPPORT2")
    child.expect(r"\[d\]efer")
    child.sendline("m")
    child.expect("Arguments as JSON")
    child.sendline('{"order_id": "78291", "customer_id": "C-1042", "amount": "lots"}')
    child.expect("amount")
    child.expect(r"\[d\]efer")
    child.sendline("r")
    child.expect("Reason")
    child.sendline("customer withdrew")
    _ends(child, "rejected", 3)


def test_interactive_defer_leaves_it_paused(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--as", "U_SUPPORT1")
    child.expect(r"\[d\]efer")
    child.sendline("d")
    _ends(child, "paused", 4)
