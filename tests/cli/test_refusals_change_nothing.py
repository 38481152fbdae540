"""Refuse before acting: every check a command can make before it changes anything comes first, so a refused
command leaves the store as it was (the audit of the refusal aside), on both stores."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hitl.engine.storage import open_store
from tests.backends import BACKENDS, fresh_store_url
from tests.cli.conftest import REFUND, Cli
from tests.refund_config import write_refund_config
from tests.store_dump import store_dump, without_audit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_store_url(request.param, request, tmp_path, tag="ref")


async def _create(url: str) -> None:
    store = open_store(url)
    await store.ping()  # SQLite creates its file on first use
    await store.close()


def _dump(url: str) -> dict[str, object]:
    return without_audit(asyncio.run(store_dump(url)))


def test_a_resume_refused_for_its_variables_records_no_decision(cli: Cli, url: str) -> None:
    paused = cli("run", str(REFUND), "--var", "order_id=78291", "--var", "amount=75", "--json", HITL_STORE=url).json()
    before = _dump(url)
    refusals = [
        ("resume", paused["approval_id"], "--approve", "--as", "U_SUPPORT1", "--var", "nosuch=1"),
        ("resume", paused["approval_id"], "--reject", "--as", "U_SUPPORT1", "--var", "nosuch=1"),
        ("resume", paused["approval_id"], "--approve", "--as", "U_SUPPORT1", "--var", "broken"),
        ("resume", paused["approval_id"], "--modify", "--as", "U_SUPPORT1", "--args", '{"amount": "lots"}'),
        ("resume", paused["approval_id"], "--approve", "--reject"),
        ("resume", "apr_NOSUCHTHING", "--approve", "--as", "U_SUPPORT1"),
    ]
    for args in refusals:
        r = cli(*args, HITL_STORE=url)
        assert r.code in (1, 2), (args, r)
        assert _dump(url) == before, args
    shown = cli("show", paused["approval_id"], "--json", HITL_STORE=url).json()
    assert shown["status"] == "pending" and shown["decisions"] == []


def test_production_refuses_auto_approve_and_interactive_before_the_run_starts(
    cli: Cli, url: str, tmp_path: Path
) -> None:
    config = tmp_path / "prod.yaml"
    write_refund_config(config, (ROOT / "examples" / "refund" / "hitl.yaml").read_text() + "production: true\n")
    asyncio.run(_create(url))  # the store exists, empty
    before = _dump(url)
    for flag in ("--auto-approve", "--interactive"):
        r = cli(
            "run", str(REFUND), "--var", "order_id=78291", "--var", "amount=75", flag,
            HITL_STORE=url, HITL_CONFIG=str(config),
        )  # fmt: skip
        assert r.code == 1 and "production: true" in r.err and flag in r.err, r
        assert _dump(url) == before, flag
    listed = cli("pending", "--json", HITL_STORE=url)
    assert json.loads(listed.out)["pending"] == []


def test_read_commands_never_create_a_store_and_an_unknown_reviewer_is_an_error(cli: Cli, tmp_path: Path) -> None:
    """A mistyped HITL_STORE or --as must not read as "nothing pending"."""
    typo = tmp_path / "nowhere" / "hitl.db"
    for args in (["pending"], ["show", "apr_X"], ["audit"], ["audit", "verify"], ["stats"], ["sessions", "list"]):
        r = cli(*args, HITL_STORE=f"sqlite:///{typo}")
        assert r.code == 1 and "no store at" in r.err and "[not_found]" in r.err, (args, r)
    assert not typo.parent.exists()
    config = str(ROOT / "examples" / "refund" / "hitl.yaml")
    cli("run", str(REFUND), "--var", "order_id=78291", "--var", "amount=75", "--json", HITL_CONFIG=config)
    r = cli("pending", "--as", "U_TYPO", HITL_CONFIG=config)
    assert r.code == 1 and "'U_TYPO' is in no role" in r.err and "support" in r.err, r
    assert "U_SUPPORT1" not in cli("pending", "--as", "U_SUPPORT1", "--json", HITL_CONFIG=config).err


def test_migrate_brings_the_schema_up_once_and_then_says_it_is_up_to_date(url: str, tmp_path: Path) -> None:
    """`hitl migrate` on a new store applies the schema (SQLite: its version; PostgreSQL: every migration; Redis:
    nothing to apply) and, run again, applies nothing."""
    env = {**os.environ, "HITL_STORE": url, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(
        [sys.executable, "-m", "hitl", "migrate", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    applied = json.loads(first.stdout)["applied"]
    assert (applied != []) is (not url.startswith("redis")), applied
    again = subprocess.run(
        [sys.executable, "-m", "hitl", "migrate"], env=env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0 and again.stdout.strip() == "the schema is up to date", again
