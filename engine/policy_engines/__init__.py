"""The policy engines a ``source:`` rule asks (:class:`~hitl.engine.ports.PolicyEngine`), one per source rule:
Cedar in-process (:mod:`.cedar`), and OPA over its HTTP Data API through the client the composition root gives
(:mod:`hitl.opa`: the engine sends no HTTP request itself). A process given no OPA client asks a person for every
call an OPA rule covers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hitl.engine.domain.policy_source import ExternalAnswer, OpaSource
from hitl.engine.domain.policy_spec import PolicySpec
from hitl.engine.policy_engines.cedar import CedarEngine
from hitl.engine.policy_engines.ports import PolicyEngine

__all__ = ["CedarEngine", "OpaClient", "engines_for"]

OpaClient = Callable[[OpaSource], PolicyEngine]
"""What asks OPA for one ``opa:`` source (the composition root's :class:`hitl.opa.OpaDataApi`)."""


class _NoOpa:
    """The engine of an ``opa:`` rule in a process given no OPA client: every answer fails (a person decides)."""

    def problems(self) -> list[str]:
        return []

    async def answer(self, request: Mapping[str, Any]) -> ExternalAnswer:
        return ExternalAnswer.failed("this process has no OPA client")


def engines_for(spec: PolicySpec, base: Path | None, *, opa: OpaClient | None = None) -> dict[str, PolicyEngine]:
    """An engine for each ``source:`` rule of ``spec``, by rule name; Cedar files are read from ``base`` (the
    directory of ``hitl.yaml``; the working directory when None), OPA is asked through ``opa``. Policies that cannot
    be loaded give an engine whose every answer fails (fail closed), and ``hitl validate`` names why."""
    out: dict[str, PolicyEngine] = {}
    for rule in spec.rules:
        if rule.source is not None and rule.source.cedar is not None:
            out[rule.name] = CedarEngine(rule.source.cedar, base or Path.cwd())
        elif rule.source is not None and rule.source.opa is not None:
            out[rule.name] = opa(rule.source.opa) if opa is not None else _NoOpa()
    return out
