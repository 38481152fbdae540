"""What the sandbox's tests share: the sandbox of the refund example on a SQLite file of the test's own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.demo.examples import refund_example
from hitl.demo.launch import Sandbox, start_sandbox
from hitl.engine.storage.sqlite import SqliteStore


@pytest.fixture
async def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Sandbox]:
    """The sandbox (emulated Slack and the bot) serving the refund example, with the web inbox as `make demo`
    serves it (signing in at the stand-in's "Sign in with Slack")."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    sb = await start_sandbox(
        config_path=refund_example() / "hitl.yaml", store=SqliteStore(tmp_path / "hitl.db"), web_inbox=True
    )
    yield sb
    await sb.close()
