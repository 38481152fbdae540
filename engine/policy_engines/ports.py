"""The port a ``source:`` rule's policy engine implements (the receipts keep theirs beside them the same way)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from hitl.engine.domain.policy_source import ExternalAnswer

__all__ = ["PolicyEngine"]


@runtime_checkable
class PolicyEngine(Protocol):
    """An external policy engine that gives a source rule's outcome (Cedar in-process, OPA over HTTP)."""

    async def answer(self, request: Mapping[str, Any]) -> ExternalAnswer:
        """The engine's answer for one call (:func:`~hitl.engine.domain.policy_source.engine_request`), mapped.
        Never raises and never waits unbounded: an error, a timeout or an unreadable answer is a failed answer."""
        ...

    def problems(self) -> list[str]:
        """What is wrong with the policies as configured (unreadable, syntax, schema, annotations): ``hitl
        validate``'s findings; empty when they load."""
        ...
