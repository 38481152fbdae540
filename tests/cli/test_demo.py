"""`hitl demo` (what `make demo` runs) works from any directory and tells the story."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import ROOT


def test_hitl_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    for name in ("HITL_STORE", "HITL_CONFIG", "HITL_REVIEWER", "HITL_NOW"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-m", "engine", "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    for expected in ("escalate", "not_eligible", "self_approval", "completed", "already_decided", "executed"):
        assert expected in text, expected
    assert "jane@example.com" not in text and "[email]" in text
    assert not (tmp_path / ".hitl").exists()  # the demo cleans up after itself
