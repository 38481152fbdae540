"""A cap on approvals over the API: the excess gets 429 with ``Retry-After`` and ``approval_flood``, nothing is
created, and the refusal is in the audit trail."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.api.conftest import Api, Receiver, api_config
from tests.bot.conftest import start, stop


async def test_the_excess_gets_429_with_retry_after_and_changes_nothing(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    config = api_config(tmp_path)
    config.write_text(config.read_text().replace("policy:\n", "policy:\n  caps:\n    session: {max: 2, per: 5m}\n", 1))
    h = await start(SqliteStore(tmp_path / "api.db"), clock, config=config)
    api = Api(h, config, Receiver())
    try:

        async def propose(order: str) -> tuple[int, dict[str, object]]:
            args = {"order_id": order, "customer_id": "C-1", "amount": 5}
            body = {"session": "flood", "tool": "refund", "idempotency_key": f"k{order}", "args": args}
            return await api.call("POST", "/proposals", as_="agent", json=body)

        assert [(await propose(str(i)))[0] for i in range(2)] == [200, 200]
        status, body = await propose("3")
        assert status == 429 and api.last_headers["Retry-After"] == "300"
        error = body["error"]
        assert isinstance(error, dict) and error["code"] == "approval_flood" and error["retryable"] is True
        assert "policy.caps.session" in str(error["message"])
        assert len((await h.rt.store.approvals.list_pending()).items) == 2
        refused = [e for e in await h.rt.store.audit.entries() if e.outcome == "approval_flood"]
        assert len(refused) == 1 and refused[0].actor == "agent:remote"
        assert (await propose("1"))[0] == 200  # the same call again (its idempotency key): its approval
    finally:
        await stop(h)
