"""A ``pay`` tool for the tests of the reviewer's queue, its attention and its hand-on: its schema in ``hitl.yaml``,
an API token's line, a harness on every store serving a given ``hitl.yaml``, and a payment proposed through it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hitl.api import token_hash
from hitl.engine.domain.models import Approval
from hitl.engine.domain.requests import ProposeRequest
from hitl.testing import FakeClock
from tests.backends import BACKENDS
from tests.bot.conftest import Harness, harness_on

__all__ = ["PAY_SCHEMA", "harness_serving", "pay", "token"]

PAY_SCHEMA = """      schema:
        type: object
        properties:
          to: {type: string, maxLength: 32}
          amount: {type: number, exclusiveMinimum: 0, x-currency: USD}
        required: [to, amount]
        additionalProperties: false
"""
"""The ``schema:`` of the ``pay`` tool, indented under ``policy.tools.pay``."""


def token(name: str, secret: str, reviewer: str, scopes: str = "[read, decide]") -> str:
    """One line of ``api.tokens`` (indented under it)."""
    return f'    - {{name: {name}, sha256: {token_hash(secret)}, reviewer: "{reviewer}", scopes: {scopes}}}\n'


def harness_serving(config: str) -> Callable[..., Any]:
    """A fixture: a harness on each store (parametrized), serving the hitl.yaml text ``config``."""

    @pytest.fixture(params=BACKENDS)
    async def h(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
        async with harness_on(request, tmp_path, clock, config) as harness:
            yield harness

    return h


async def pay(h: Harness, amount: float, to: str, *, session: str | None = None) -> Approval:
    """Propose paying ``amount`` to ``to`` (in session ``ses_<to>`` unless named), and let its card be posted."""
    p = await h.svc.propose(ProposeRequest("pay", {"to": to, "amount": amount}, session_id=session or f"ses_{to}"))
    assert p.approval is not None
    await h.settle()
    return p.approval  # type: ignore[no-any-return]
