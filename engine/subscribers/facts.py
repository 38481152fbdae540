"""Facts: what happened to a proposed action, told to the subscribers that observe it.

The service publishes a typed fact at each step (an approval was proposed, an action was allowed without a
person, a decision was recorded, an approval expired or was cancelled). A :class:`FactSubscriber` observes facts
and never changes a decision: tallies, spot checks, practice twins, rolling windows, the notifier and webhooks
are subscribers (:mod:`hitl.engine.subscribers`), each saying which facts it observes. A subscriber that fails is
logged and the next one still hears the fact; nothing it does is undone. Adding an observing measure is a
subscriber and its registration, no line of the service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hitl.engine.domain.actions import ProposedAction
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.policy import Verdict
from hitl.engine.domain.requests import ProposeRequest

if TYPE_CHECKING:
    from hitl.engine.consequences.callables import ConsequenceFn
    from hitl.engine.consequences.running import ConsequenceRunner
    from hitl.engine.domain.drafts import ApprovalDrafts
    from hitl.engine.domain.policy import Policy
    from hitl.engine.domain.practice import PracticeSpec
    from hitl.engine.domain.redaction import Redactor
    from hitl.engine.domain.spot_checks import SpotCheckSpec
    from hitl.engine.ports import Clock, Notifier, Store
    from hitl.engine.subscribers.events import EventSink

__all__ = [
    "Allowed",
    "Cancelled",
    "Decided",
    "Expired",
    "Fact",
    "FactSubscriber",
    "Proposed",
    "Route",
    "Service",
    "routes",
]


@dataclass(slots=True)
class Proposed:
    """A new approval was stored: an action's, a spot check's or a practice twin's."""

    approval: Approval


@dataclass(slots=True)
class Allowed:
    """An action goes ahead without a person: the policy let it (auto or notify) or a Trust did."""

    request: ProposeRequest
    verdict: Verdict
    action: ProposedAction
    now: float


@dataclass(slots=True)
class Decided:
    """A decision was recorded (its card update and its run's resume are queued with it)."""

    approval: Approval
    """The approval after the decision."""
    kind: DecisionKind


@dataclass(slots=True)
class Expired:
    """An approval nobody decided in time expired (never a rejection)."""

    approval: Approval


@dataclass(slots=True)
class Cancelled:
    """A pending approval was closed because nobody will act on it."""

    approval: Approval


Fact = Proposed | Allowed | Decided | Expired | Cancelled


class Service(Protocol):
    """What a subscriber (or a guard) may read of the service that publishes to it, read when the fact arrives:
    a service reconfigured meanwhile (a new notifier, new spot checks) is observed as it is now."""

    store: Store
    clock: Clock
    policy: Policy
    notifier: Notifier | None
    events: EventSink | None
    spot_check: SpotCheckSpec
    practice: PracticeSpec
    consequences: ConsequenceRunner
    redactor: Redactor

    @property
    def given_consequences(self) -> Mapping[str, ConsequenceFn]:
        """The consequences given beside tools in Python in this process, by tool."""
        ...

    @property
    def drafts(self) -> ApprovalDrafts:
        """Builds the approvals the service makes."""
        ...

    async def publish(self, fact: Fact) -> None:
        """Tell every subscriber ``fact``."""
        ...


class FactSubscriber(Protocol):
    """Observes facts; never changes a decision (a guard does that). A subscriber may say which facts it observes
    with an ``observes`` attribute (a tuple of fact types): it then hears only those (without one, every fact). It
    may also have a ``wants(fact, service) -> bool`` method, asked first without awaiting anything: a subscriber
    that has nothing to do for most facts of a kind (an FYI only for notify calls) costs them no coroutine."""

    async def observe(self, fact: Fact, service: Service) -> None:
        """React to ``fact`` (most subscribers ignore most facts)."""
        ...


Route = tuple[tuple[FactSubscriber, Callable[[Fact, Service], bool] | None], ...]
"""The subscribers one kind of fact goes to, in order, each with its ``wants`` (None: it wants every one)."""


def routes(subscribers: Sequence[FactSubscriber]) -> dict[type, Route]:
    """Which subscribers hear each kind of fact, in order: those whose ``observes`` names it, and those without one.
    Worked out once per list of subscribers, so a fact no subscriber observes costs nothing to publish."""
    kinds = (Proposed, Allowed, Decided, Expired, Cancelled)
    return {
        kind: tuple((s, getattr(s, "wants", None)) for s in subscribers if kind in getattr(s, "observes", kinds))
        for kind in kinds
    }
