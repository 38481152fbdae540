"""A ``pay`` tool for the tests of the reviewer's queue, its attention and its hand-on: the pieces of their
``hitl.yaml`` (its head, a tool, the rule escalating large payments, API tokens), a harness on every store serving a
given ``hitl.yaml``, and a payment proposed through it."""

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

__all__ = [
    "LARGE_PAYMENTS_ESCALATE",
    "PAY_SCHEMA",
    "PAY_SUMMARY",
    "TYPED_ESCALATION",
    "api_tokens",
    "harness_serving",
    "pay",
    "requested_by_riley",
    "token",
    "tool",
]

PAY_SCHEMA = """      schema:
        type: object
        properties:
          to: {type: string, maxLength: 32}
          amount: {type: number, exclusiveMinimum: 0, x-currency: USD}
        required: [to, amount]
        additionalProperties: false
"""
"""The ``schema:`` of the ``pay`` tool, indented under ``policy.tools.pay``."""

PAY_SUMMARY = '"Pay {{ args.amount | money }} to {{ args.to }}"'
"""The ``summary:`` of the ``pay`` tool (quoted for YAML): the card's sentence, amount included."""

TYPED_ESCALATION = """  tiers:
    escalate: {confirm: [amount], approve_reason: required}
"""
"""``policy.tiers``: approving an escalation asks the amount typed again and a reason."""

LARGE_PAYMENTS_ESCALATE = """  rules:
    - {name: large_payment, tools: [pay], when: "args.amount > 500", tier: escalate}
"""
"""``policy.rules``: a payment over 500 is escalated."""


def requested_by_riley(**roles: str) -> str:
    """The head of ``hitl.yaml``: ``agent:riley`` proposes, each of ``roles`` holds its members (a YAML flow list),
    and ``policy.tools`` opens for the tools that follow."""
    held = "".join(f"  {role}: {members}\n" for role, members in roles.items())
    return f"\nrequester: agent:riley\nroles:\n{held}policy:\n  tools:\n"


def tool(name: str, schema: str = PAY_SCHEMA, **settings: str | int) -> str:
    """One tool under ``policy.tools``: its ``settings`` in the order given, then its ``schema`` (the ``pay`` tool's
    unless another is given)."""
    return f"    {name}:\n" + "".join(f"      {key}: {value}\n" for key, value in settings.items()) + schema


def api_tokens(*lines: str) -> str:
    """The ``api.tokens`` section holding ``lines`` (each made by ``token``)."""
    return "api:\n  tokens:\n" + "".join(lines)


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
