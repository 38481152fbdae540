"""The policy engines' answers for one call (``source:`` rules), asked before the policy is evaluated, as the rolling
windows are read before it: evaluation stays pure, and the engines' I/O is bounded here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from hitl.engine.domain.policy import Policy, WindowStats
from hitl.engine.domain.policy_source import ExternalAnswer, engine_request
from hitl.engine.policy_engines.ports import PolicyEngine

__all__ = ["consulted"]

log = logging.getLogger(__name__)

_BACKSTOP = 35.0
"""The longest any engine is waited for, whatever it bounds itself by (an OPA source's timeout is at most 30 s)."""


async def consulted(
    engines: Mapping[str, PolicyEngine],
    policy: Policy,
    tool: str,
    args: Mapping[str, Any],
    *,
    requester: str,
    session_id: str,
    windows: Mapping[str, WindowStats],
) -> dict[str, ExternalAnswer]:
    """Each ``source:`` rule's answer for ``tool`` with ``args``, by rule name, asked together. A rule without an
    engine, or whose engine raises or overruns, gets a failed answer: the call asks a person."""
    rules = [r for r in policy.spec.rules if r.source is not None and ("*" in r.tools or tool in r.tools)]
    if not rules:
        return {}
    sums: dict[str, dict[str, float]] = {}
    for key, (_, amount) in policy.window_keys(tool, args).items():
        prior = windows.get(key, WindowStats())
        # This call included, as a native rule compares it.
        sums[key.split(":", 1)[0]] = {"count": prior.count + 1, "total": prior.total + amount}
    request = engine_request(tool, args, requester=requester, session_id=session_id, sums=sums)
    answers = await asyncio.gather(*(_asked(engines.get(r.name), r.name, request) for r in rules))
    return {r.name: a for r, a in zip(rules, answers, strict=True)}


async def _asked(engine: PolicyEngine | None, rule: str, request: Mapping[str, Any]) -> ExternalAnswer:
    if engine is None:
        return ExternalAnswer.failed("no engine is configured for this rule")
    try:
        return await asyncio.wait_for(engine.answer(request), _BACKSTOP)
    except Exception as exc:  # an engine never lets a call through by failing: it asks a person
        log.warning("policy engine of rule %s failed (%s); a person decides", rule, exc)
        return ExternalAnswer.failed(f"the engine failed: {type(exc).__name__}")
