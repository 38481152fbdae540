"""Workflow patterns run as a user runs them: each `hitl` command a fresh process on one store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESEARCH = ROOT / "examples" / "research"


@dataclass
class Ran:
    code: int
    out: dict[str, Any]
    err: str

    @property
    def status(self) -> str:
        return str(self.out.get("status"))

    @property
    def tool(self) -> str | None:
        approval = self.out.get("approval")
        return str(approval["tool"]) if approval else None

    @property
    def approval_id(self) -> str:
        return str(self.out["approval_id"])


Hitl = Callable[..., Ran]


@dataclass
class Desk:
    """The research desk's effect log: every tool call that really ran, in order."""

    path: Path

    def calls(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def tools(self) -> list[str]:
        return [c["tool"] for c in self.calls()]

    def assert_nothing_twice(self) -> None:
        counted = Counter(c["key"] for c in self.calls())
        assert all(n == 1 for n in counted.values()), counted


@pytest.fixture
def desk(tmp_path: Path) -> Desk:
    return Desk(tmp_path / "effects.jsonl")


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/hitl.db"


@pytest.fixture
def hitl(tmp_path: Path, desk: Desk, store_url: str) -> Hitl:
    """``hitl ARGS --json`` in a new process (what a person or a cron job does days apart)."""
    base = {
        **os.environ,
        "HITL_STORE": store_url,
        "HITL_CONFIG": str(RESEARCH / "hitl.yaml"),
        "HITL_EFFECTS": str(desk.path),
        "HITL_REVIEWER": "",
        "COLUMNS": "200",
    }
    base.pop("HITL_API_URL", None)
    base.pop("HITL_NOW", None)

    def run(*args: str, expect: int | None = None, env: dict[str, str] | None = None) -> Ran:
        proc = subprocess.run(
            [sys.executable, "-m", "hitl", *args, "--json"],
            cwd=tmp_path,
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        assert "Traceback" not in proc.stderr, proc.stderr
        if proc.returncode < 0:  # killed: it printed nothing
            return Ran(proc.returncode, {}, proc.stderr)
        assert len(lines) == 1, (proc.stdout, proc.stderr)
        ran = Ran(proc.returncode, json.loads(lines[0]), proc.stderr)
        if expect is not None:
            assert ran.code == expect, (ran.out, ran.err)
        return ran

    return run
