"""The policy engines a ``source:`` rule asks (:class:`~hitl.engine.ports.PolicyEngine`): Cedar in-process
(:mod:`.cedar`) and OPA over its HTTP Data API (:mod:`.opa`), one per source rule."""

from __future__ import annotations

from pathlib import Path

from hitl.engine.domain.policy_spec import PolicySpec
from hitl.engine.policy_engines.cedar import CedarEngine
from hitl.engine.policy_engines.opa import OpaEngine
from hitl.engine.ports import PolicyEngine

__all__ = ["CedarEngine", "OpaEngine", "engines_for"]


def engines_for(spec: PolicySpec, base: Path | None) -> dict[str, PolicyEngine]:
    """An engine for each ``source:`` rule of ``spec``, by rule name; Cedar files are read from ``base`` (the
    directory of ``hitl.yaml``; the working directory when None). Policies that cannot be loaded give an engine
    whose every answer fails (fail closed), and ``hitl validate`` names why."""
    out: dict[str, PolicyEngine] = {}
    for rule in spec.rules:
        if rule.source is not None and rule.source.cedar is not None:
            out[rule.name] = CedarEngine(rule.source.cedar, base or Path.cwd())
        elif rule.source is not None and rule.source.opa is not None:
            out[rule.name] = OpaEngine(rule.source.opa)
    return out
