"""What runs a consequence, as the approval service sees it: one port, two ways (a thread of this process, or a
worker process), and the per-tool slots that bound how many run at once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hitl.engine.consequences.callables import Source
from hitl.engine.domain.consequences import Consequence, ConsequenceLimits, ConsequenceOutcome, not_computed, shaped

__all__ = ["ConsequenceCall", "ConsequenceRunner", "Slots"]


@dataclass(frozen=True)
class ConsequenceCall:
    """One consequence to compute: ``tool``'s ``source`` on a copy of ``args``, within ``limits``, every string it
    returns through ``redact``. How it ends is said here once, for every runner: :meth:`busy`, :meth:`timed_out`,
    :meth:`failed`, or what it returned :meth:`answered`."""

    tool: str
    source: Source
    args: Mapping[str, Any]
    limits: ConsequenceLimits
    redact: Callable[[str], str]

    def busy(self) -> Consequence:
        """Not computed: the tool's slots were all taken."""
        return not_computed(ConsequenceOutcome.BUSY, f"busy: {self.limits.workers} already running")

    def timed_out(self) -> Consequence:
        """Not computed within its time bound."""
        return not_computed(ConsequenceOutcome.TIMED_OUT, f"timed out after {self.limits.timeout:g} s")

    def failed(self, why: str) -> Consequence:
        """Not computed: it raised, could not be run, or its runner broke (``why``, after "failed: ")."""
        return not_computed(ConsequenceOutcome.FAILED, f"failed: {why}")

    def answered(self, returned: object) -> Consequence:
        """What it returned, checked against its limits and redacted (:func:`shaped`)."""
        return shaped(returned, self.limits, redact=self.redact)


class ConsequenceRunner(Protocol):
    """Computes a tool's consequence within its limits; never raises, never waits past ``limits.timeout``."""

    async def compute(self, call: ConsequenceCall) -> Consequence:
        """The consequence of calling ``call.tool`` with its arguments (a copy is what its source sees), or why
        none."""
        ...

    async def aclose(self) -> None:
        """Stop what it started (worker processes); a consequence still running is left to end or be killed."""
        ...


@dataclass
class Slots:
    """How many consequences of each tool run now: one more than the tool's ``workers`` is refused at once."""

    running: dict[str, int] = field(default_factory=dict)

    def take(self, tool: str, most: int) -> bool:
        """Take a slot of ``tool``'s (False: all ``most`` are taken)."""
        if self.running.get(tool, 0) >= most:
            return False
        self.running[tool] = self.running.get(tool, 0) + 1
        return True

    def give_back(self, tool: str) -> None:
        """A consequence of ``tool`` ended (returned, failed or was killed)."""
        self.running[tool] = max(self.running.get(tool, 0) - 1, 0)
