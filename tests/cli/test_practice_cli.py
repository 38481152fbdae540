"""Practice approvals from the CLI: a run's approval gets its practice twin; `hitl practice` lists the twins waiting
(the admin role only); `hitl pending` shows them as any other; deciding one tells the decider, and runs nothing;
`hitl reviewers` gives the figures per reviewer (the admin role only)."""

from __future__ import annotations

from pathlib import Path

from hitl.engine.testing.conformance.adapters import PRACTICE_CONFIG
from tests.cli.conftest import REFUND, Cli
from tests.cli.test_refund_cli import run_refund
from tests.refund_config import write_refund_config


def test_practice_twins_are_listed_for_admins_and_tell_the_decider(cli: Cli, tmp_path: Path, shop) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "hitl.yaml"
    text = (REFUND.parent / "hitl.yaml").read_text().replace("roles:\n", "roles:\n  admin: [U_ADMIN]\n", 1)
    write_refund_config(config, text + PRACTICE_CONFIG)
    paused = run_refund(cli, HITL_CONFIG=str(config))
    real = str(paused["approval_id"])

    refused = cli("practice", "--as", "U_SUPPORT1", "--json", HITL_CONFIG=str(config))
    assert refused.code == 1 and refused.json()["error"]["code"] == "not_eligible"
    [twin] = cli("practice", "--as", "U_ADMIN", "--json", HITL_CONFIG=str(config)).json()["practice"]
    assert twin["copy_of"] == real and twin["defect"] == "amount_off"
    pending = {a["id"] for a in cli("pending", "--json").json()["pending"]}
    assert pending == {real, twin["id"]}  # to reviewers, a practice approval is one more approval

    done = cli("resume", twin["id"], "--approve", "--as", "U_SUPPORT1", HITL_CONFIG=str(config))
    assert done.code == 0, done.err
    assert "That was a practice check" in done.out and "the defect was missed" in done.out
    assert shop("SELECT * FROM refunds") == []  # nothing ran
    assert cli("practice", "--as", "U_ADMIN", "--json", HITL_CONFIG=str(config)).json()["practice"] == []
    no = cli("resume", real, "--reject", "--reason", "not this one", "--as", "U_SUPPORT2", HITL_CONFIG=str(config))
    assert no.code == 3, no.err
    refused = cli("reviewers", "--as", "U_SUPPORT1", "--json", HITL_CONFIG=str(config))
    assert refused.code == 1 and refused.json()["error"]["code"] == "not_eligible"
    figures = {
        r["reviewer"]: r
        for r in cli("reviewers", "--as", "U_ADMIN", "--json", HITL_CONFIG=str(config)).json()["reviewers"]
    }
    assert (figures["U_SUPPORT1"]["practice_missed"], figures["U_SUPPORT1"]["catch_rate"]) == (1, 0.0)
    assert (figures["U_SUPPORT2"]["decisions"], figures["U_SUPPORT2"]["corrections"]) == (1, 1)
    table = cli("reviewers", "--as", "U_ADMIN", HITL_CONFIG=str(config)).out
    assert "U_SUPPORT1" in table and "missed" in table
