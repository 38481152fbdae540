"""Cedar policies evaluated in-process by the Cedar engine (``cedarpy``, the ``policy`` extra).

The request: principal ``User::"<requester>"``, action ``Action::"<tool>"``, resource ``Tool::"<tool>"``, context
``{args, session, rolling}``; no entities (an argument object shaped as Cedar's entity or extension escape makes
the request fail, so the call asks a person). Cedar has no fractional numbers: a whole float is passed as a Long, any
other makes the request fail, and so the call asks a person (fail closed).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hitl.engine.domain.policy_source import CedarSource, ExternalAnswer, annotation_problems, from_cedar

__all__ = ["CedarEngine"]

log = logging.getLogger(__name__)


class CedarEngine:
    """One rule's Cedar policies (and schema), loaded once when the service starts."""

    def __init__(self, source: CedarSource, base: Path) -> None:
        self._problems: list[str] = []
        self._set: Any = None
        self._schema: Any = None
        self._policies: dict[str, tuple[str, dict[str, str]]] = {}
        try:
            import cedarpy
        except ImportError:
            self._problems.append("the Cedar engine is not installed: pip install 'hitl-gate[policy]'")
            return
        texts = [self._read(base / name, name) for name in source.policies]
        schema = self._read(base / source.schema_, source.schema_) if source.schema_ else None
        if self._problems:
            return
        text = "\n".join(t or "" for t in texts)
        try:
            self._set = cedarpy.PolicySet.from_str(text)
            parsed = json.loads(cedarpy.policies_to_json_str(text))["staticPolicies"]
        except (ValueError, KeyError) as exc:
            self._problems.append(f"{', '.join(source.policies)}: not valid Cedar: {exc}")
            self._set = None
            return
        for pid, body in parsed.items():
            notes = {str(k): str(v) for k, v in body.get("annotations", {}).items()}
            rid = notes.get("id", pid)
            self._policies[pid] = (rid, {**notes, "effect": str(body.get("effect"))})
            self._problems += annotation_problems(rid, notes)
        if schema is not None:
            self._check_schema(cedarpy, text, schema, source.schema_ or "")

    def _read(self, path: Path, name: str) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            self._problems.append(f"cannot read {name}: {exc.strerror or exc}; put it beside hitl.yaml")
            return None

    def _check_schema(self, cedarpy: Any, text: str, schema: str, name: str) -> None:
        try:
            self._schema = cedarpy.Schema.from_str(schema)
            checked = cedarpy.validate_policies(text, self._schema)
        except ValueError as exc:
            self._problems.append(f"{name}: not a valid Cedar schema: {exc}")
            self._set = None
            return
        if not checked.validation_passed:
            self._problems += [f"{name}: {e}" for e in checked.errors]
            self._set = None

    def problems(self) -> list[str]:
        """What stops the policies from loading, or what their annotations say that the mapping cannot read."""
        return list(self._problems)

    async def answer(self, request: Mapping[str, Any]) -> ExternalAnswer:
        """Cedar's decision and the policies that made it, mapped; any error fails closed. Evaluation is in-process
        and takes microseconds, so it runs on the caller's thread."""
        if self._set is None or self._problems:
            return ExternalAnswer.failed("; ".join(self._problems) or "the Cedar policies did not load")
        import cedarpy

        try:
            result = cedarpy.is_authorized(
                {
                    "principal": {"type": "User", "id": str(request["principal"])},
                    "action": {"type": "Action", "id": str(request["action"])},
                    "resource": {"type": "Tool", "id": str(request["resource"])},
                    "context": _whole(request["context"]),
                },
                self._set,
                [],
                self._schema,
            )
        except (ValueError, TypeError, KeyError) as exc:
            return ExternalAnswer.failed(f"Cedar refused the request: {exc}")
        errors = list(result.diagnostics.errors)
        if errors or result.decision.value not in ("Allow", "Deny"):
            log.warning("Cedar could not decide (%s); a person decides", "; ".join(errors)[:300])
            return ExternalAnswer.failed(f"Cedar could not decide: {'; '.join(errors)[:200] or result.decision.value}")
        matched = [
            (self._policies[p][0], self._policies[p][1]["effect"], self._policies[p][1])
            for p in result.diagnostics.reasons
            if p in self._policies
        ]
        return from_cedar(result.decision.value, matched)


_ESCAPES = frozenset({"__entity", "__extn", "__expr"})
"""The keys by which Cedar's JSON reads an object as an entity reference or an extension value, not a record."""


def _whole(value: Any) -> Any:
    """``value`` with whole floats as integers (Cedar's Long); other values as they are. An object with one of
    Cedar's escape keys is refused (``ValueError``: a person decides): the arguments are the agent's, and read as an
    escape they would forge a typed value (an entity equal to the principal) that no plain argument can be."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        if _ESCAPES.intersection(map(str, value)):
            raise ValueError(f"an argument object has a key Cedar reads as an escape ({', '.join(sorted(_ESCAPES))})")
        return {str(k): _whole(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_whole(v) for v in value]
    return value
