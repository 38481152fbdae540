"""A withdrawal through `hitl serve`'s API, `hitl withdraw` (a real process) through it, or `hitl withdraw --as`
against the store `hitl serve` serves, draws the card again as the Slack form's withdrawal does: once, through the
card-update worker (a withdrawal makes no new version of the approval to do it), showing who withdrew it and why,
inert, and no Withdraw button left, on SQLite and Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.cli_process import hitl as run_hitl
from tests.bot.conftest import Harness
from tests.bot.test_withdraw_card import _approved_receipt, _block, assert_withdrawn
from tests.receipts.conftest import FIN1, api

REASON = "the vendor's bank details changed *today* <!channel>"


@pytest.mark.parametrize("surface", ["api", "cli", "local"])
async def test_a_withdrawal_by_the_api_or_the_cli_draws_the_card_once(
    paying: Harness, tmp_path: Path, surface: str
) -> None:
    h = paying
    approval_id, _ = await _approved_receipt(h, f"k-{surface}", 31)
    card = h.card_for(approval_id)
    assert _block(card, "hitl_withdraw:") is not None  # offered while unspent
    before = len(h.state.calls_to("chat.update"))

    if surface == "api":
        await api(h, "POST", f"/approvals/{approval_id}/withdrawal", FIN1, {"reason": REASON})
    elif surface == "cli":
        env = {"HITL_API_URL": h.bot_url, "HITL_TOKEN": FIN1, "HITL_STORE": "sqlite:///nonexistent/x.db"}
        code, body, err = await run_hitl("withdraw", approval_id, "--reason", REASON, "--json", env=env)
        assert code == 0 and body == {"approval_id": approval_id, "withdrawn": True}, (body, err)
    else:  # against the store: the command holds no Slack client, so it queues the update for hitl serve's worker
        assert h.store_url is not None
        env = {
            "HITL_API_URL": "",
            "HITL_TOKEN": "",
            "HITL_STORE": h.store_url,
            "HITL_CONFIG": str(tmp_path / "hitl.yaml"),
        }
        argv = ("withdraw", approval_id, "--reason", REASON, "--as", "U_FIN1", "--json")
        code, body, err = await run_hitl(*argv, env=env)
        assert code == 0 and body == {"approval_id": approval_id, "withdrawn": True}, (body, err)
        await h.rt.ctx.notifier.sweep()  # what the worker's next look at the queue (or the sweep) finds
    await h.settle()

    updates = [c for c in h.state.calls_to("chat.update")[before:] if c.args.get("ts") == card.ts]
    assert len(updates) == 1, updates
    assert_withdrawn(h.card_for(approval_id), REASON)
    assert not any(a.get("action_id") == "hitl_withdraw" for b in card.blocks for a in b.get("elements", []))
