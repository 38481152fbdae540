"""Facts and who observes them: the typed facts the service publishes (:mod:`hitl.engine.subscribers.facts`), the
subscribers hitl ships, in the order each fact reaches them, and the events queued for the outside context
(:mod:`hitl.engine.subscribers.events`, what the webhooks deliver).

Rolling windows first (what a rule counts must be right before anything reads it), then the metrics, spot checks,
the reviewers' notices, webhooks, and practice twins last (a twin is announced after its real approval).
"""

from __future__ import annotations

from collections.abc import Sequence

from hitl.engine.subscribers.facts import FactSubscriber

from .notifications import Notifications
from .practice import PracticeTwins
from .spot_checks import SpotChecks
from .tallies import Tallies
from .webhooks import Webhooks
from .windows import RollingWindows

__all__ = ["SUBSCRIBERS", "Notifications", "PracticeTwins", "RollingWindows", "SpotChecks", "Tallies", "Webhooks"]

SUBSCRIBERS: Sequence[FactSubscriber] = (
    RollingWindows(),
    Tallies(),
    SpotChecks(),
    Notifications(),
    Webhooks(),
    PracticeTwins(),
)
"""Every subscriber a service has unless it is given others."""
