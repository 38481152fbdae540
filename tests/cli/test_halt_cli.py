"""``hitl halt`` / ``unhalt`` / ``halts``: the admin role only (when hitl.yaml defines it), a run started while
halted pauses and goes on after the unhalt, and the orders outlive the processes that gave them."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import REFUND, Cli
from tests.refund_config import write_refund_config


def admin_config(tmp_path: Path) -> str:
    text = (REFUND.parent / "hitl.yaml").read_text().replace("roles:\n", "roles:\n  admin: [U_ADMIN]\n", 1)
    return str(write_refund_config(tmp_path / "hitl.yaml", text))  # with the consequence module it names


def test_halt_pause_and_unhalt_from_the_cli(cli: Cli, tmp_path: Path, shop) -> None:  # type: ignore[no-untyped-def]
    config = admin_config(tmp_path)
    refused = cli("halt", "--tool", "refund", "--as", "U_SUPPORT1", "--json", HITL_CONFIG=config)
    assert refused.code == 1 and refused.json()["error"]["code"] == "not_eligible"
    done = cli(
        "halt", "--tool", "refund", "--reason", "refunds look wrong", "--as", "U_ADMIN", "--json", HITL_CONFIG=config
    )
    assert done.code == 0 and done.json()["halt"]["scope"] == "refund"
    listed = cli("halts", "--json").json()["halts"]  # another process: the order is in the store
    assert [(h["scope"], h["by"], h["reason"]) for h in listed] == [("refund", "U_ADMIN", "refunds look wrong")]

    run = cli("run", str(REFUND), "--var", "order_id=78291", "--var", "amount=120", "--json", HITL_CONFIG=config)
    body = run.json()
    assert body["status"] == "paused" and "approval_id" not in body
    assert body["reason"].startswith("halted: halted by U_ADMIN: refunds look wrong")
    assert shop("SELECT * FROM refunds") == []

    text = cli("halts").out
    assert "refund" in text and "U_ADMIN" in text and "refunds look wrong" in text
    lifted = cli("unhalt", "--tool", "refund", "--as", "U_ADMIN", "--json", HITL_CONFIG=config)
    assert lifted.code == 0 and lifted.json()["resumed_runs"] == 1
    assert cli("halts", "--json").json()["halts"] == []
    again = cli("unhalt", "--tool", "refund", "--as", "U_ADMIN", "--json", HITL_CONFIG=config)
    assert again.code == 1 and "is not halted" in again.json()["error"]["message"]
    shown = cli("sessions", "show", body["session_id"], "--json").json()
    assert shown["status"] == "paused" and shown["interrupts"] and not shown["reason"]  # on its approval now
    audit = cli("audit", "--json").json()["audit"]
    assert [e["event"] for e in audit if "halted" in e["event"]] == ["halted", "unhalted"]
