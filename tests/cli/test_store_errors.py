"""A store that does not answer gives every command the same clean, coded error (exit 1), never a traceback."""

from __future__ import annotations

import pytest

from tests.cli.conftest import REFUND, Cli
from tests.ports import free_port

COMMANDS = [
    ("pending",),
    ("show", "apr_0000000000"),
    ("audit",),
    ("expire",),
    ("resume", "apr_0000000000", "--approve", "--as", "U_SUPPORT1"),
    ("run", str(REFUND), "--var", "order_id=1", "--var", "amount=5"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_dead_redis_is_a_coded_error_for_every_command(cli: Cli, command: tuple[str, ...]) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    r = cli(*command, "--json", HITL_STORE=dead)
    assert r.code == 1, r.out
    error = r.json()["error"]
    assert error["code"] == "store_error" and "Redis is up" in error["message"]
    assert "Traceback" not in r.out + r.err
