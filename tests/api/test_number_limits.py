"""The HTTP API's answer to numbers beyond what JSON carries exactly: a 422 naming the limit, nothing proposed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.engine.domain.hashing import MAX_EXACT_INT
from hitl.testing import FakeClock
from tests.api.conftest import shop_api, sqlite_api
from tests.bot.conftest import ROOT


async def test_a_proposal_with_a_number_too_large_is_a_422(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch) as api:
        for i, amount in enumerate(["9" * 10_000, str(MAX_EXACT_INT + 1), "-1" + "0" * 30, "1e300"]):
            raw = f'{{"session": "s", "tool": "refund", "idempotency_key": "k{i}", "args": {{"order_id": "1", '
            raw += f'"customer_id": "C", "amount": {amount}}}}}'
            headers = {"Content-Type": "application/json"}
            status, problem = await api.call("POST", "/proposals", as_="agent", data=raw, headers=headers)
            assert status == 422, (amount[:30], problem)
            assert problem["error"]["code"] == "invalid_input" and str(MAX_EXACT_INT) in problem["error"]["message"]
        status, listed = await api.call("GET", "/approvals?status=any", as_="admin")
        assert listed["items"] == []


async def test_the_receipts_page_quotes_each_refusal_as_the_api_words_it(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's number rule gives the refusals' exact wording (22 digits, an exponent, a number too long to
    read): each is what a proposal gets from the real API (with the page's argument `n` for `amount`)."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    page = " ".join((ROOT / "docs" / "pages" / "receipts.md").read_text().split())
    async with sqlite_api(tmp_path, clock) as api:
        for i, amount in enumerate(["1" + "0" * 21, "1e21", "9" * 10_000]):
            raw = f'{{"session": "s", "tool": "refund", "idempotency_key": "q{i}", "args": {{"order_id": "1", '
            raw += f'"customer_id": "C", "amount": {amount}}}}}'
            headers = {"Content-Type": "application/json"}
            status, problem = await api.call("POST", "/proposals", as_="agent", data=raw, headers=headers)
            assert status == 422 and problem["error"]["code"] == "invalid_input", problem
            said = problem["error"]["message"].replace("args.amount", "args.n")
            assert f"`{said}`" in page, said
