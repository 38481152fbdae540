"""A protected system's token made the way the receipts page says: `hitl token new --scope redeem --audience AUD`
(a real CLI process), its entry pasted into the `hitl.yaml` a running `hitl serve` reads. It spends a receipt issued
for its audience; a token made for another audience cannot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.bot.conftest import ROOT, Harness
from tests.receipts.conftest import AGENT, api, approve


def _hitl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hitl", *args],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _token_for(audience: str, name: str) -> tuple[str, dict[str, Any]]:
    made = _hitl("token", "new", "--name", name, "--as", f"svc:{name}", "--scope", "redeem", "--audience", audience)
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    token = lines[1]
    # The entry exactly as printed, pasted under api.tokens.
    entry = yaml.safe_load("\n".join(lines[lines.index("add under api.tokens in hitl.yaml:") + 1 :]))[0]
    return token, entry


async def test_a_redeem_token_made_with_its_audience_spends_that_audiences_receipts(
    hitl: Harness, tmp_path: Path
) -> None:
    payments, entry = _token_for("payments", "shop-payments")
    bank, other = _token_for("bank", "bank")
    assert entry["audience"] == "payments" and entry["scopes"] == ["redeem"]
    config = tmp_path / "hitl.yaml"
    loaded = yaml.safe_load(config.read_text())
    loaded["api"]["tokens"] += [entry, other]
    config.write_text(yaml.safe_dump(loaded))

    proposal = {"session": "ses_aud", "tool": "pay", "args": {"to": "V-1", "amount": 12}, "idempotency_key": "k-aud"}
    pending = await api(hitl, "POST", "/proposals", AGENT, proposal)
    await approve(hitl, pending["approval"])
    claim = {"action_hash": pending["approval"]["execute_hash"]}
    receipt = (await api(hitl, "POST", f"/executions/{pending['execution_key']}/claim", AGENT, claim))["receipt"]

    async def redeem(token: str) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        url = f"{hitl.bot_url}/api/v1/receipts/redeem"
        async with hitl.http.post(url, json={"receipt": receipt}, headers=headers) as r:
            return r.status, await r.json()

    status, refused = await redeem(bank)  # a token for another protected system: nothing spent
    assert status == 422 and refused["error"]["code"] == "invalid_receipt", refused
    status, spent = await redeem(payments)
    assert status == 200 and spent["first"] is True, spent


def test_the_token_command_lists_redeem_and_refuses_an_audience_that_would_mean_nothing() -> None:
    helped = _hitl("token", "new", "--help")
    said = " ".join(helped.stdout.replace("│", " ").split())
    assert "redeem (a protected system spending receipts)" in said and "--audience" in said, helped.stdout
    from hitl.engine.config.api import Scope

    assert all(str(s) in said for s in Scope)  # the help names every scope a token may hold
    wrong = _hitl("token", "new", "--name", "n", "--as", "svc:n", "--scope", "read", "--audience", "payments")
    assert wrong.returncode == 2 and "add --scope redeem" in wrong.stderr, wrong.stderr
