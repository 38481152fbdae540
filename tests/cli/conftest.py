from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hitl.cli import app
from tests.api.cli_process import store_env

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "examples" / "refund" / "workflow.yaml"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        lines = [line for line in self.out.splitlines() if line.strip()]
        assert len(lines) == 1, self.out  # --json prints exactly one object
        return dict(json.loads(lines[0]))


Cli = Callable[..., Result]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return store_env(tmp_path, HITL_NOW="", COLUMNS="200")


@pytest.fixture
def cli(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()

    def invoke(*args: str, **extra_env: str) -> Result:
        r = runner.invoke(app, list(args), env={**env, **extra_env}, catch_exceptions=False)
        return Result(r.exit_code, r.stdout, r.stderr)

    return invoke


@pytest.fixture
def shop(env: dict[str, str]) -> Callable[[str], list[tuple[Any, ...]]]:
    def query(sql: str) -> list[tuple[Any, ...]]:
        path = Path(env["SHOP_DB"])
        if not path.exists():
            return []
        with sqlite3.connect(path) as db:
            return db.execute(sql).fetchall()

    return query
