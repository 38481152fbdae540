"""The time to an approval's first interaction (a button pressed, a view opened, ``/hitl show``): counted once across
processes, by an execution claim on ``seen:<id>`` in the ledger, into the store's tallies."""

from __future__ import annotations

import logging

from hitl.engine.domain.models import Approval
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.domain.tally import first_seen_counts
from hitl.engine.errors import EngineError
from hitl.engine.ports import Store

__all__ = ["count_first_interaction"]

log = logging.getLogger(__name__)


async def count_first_interaction(store: Store, approval: Approval, now: float) -> bool:
    """Count the time to ``approval``'s first interaction, once across processes; True when this was the first.
    Practice copies and spot checks count only in their own measures; a count never fails the interaction."""
    if is_practice(approval) or is_spot_check(approval):
        return False
    key, holder = f"seen:{approval.id}", "first-interaction"
    try:
        claim = await store.ledger.claim(key, action_hash=approval.action_hash, holder=holder, now=now, lease=60)
        if not claim.acquired:
            return False
        await store.ledger.record_outcome(key, holder=holder, attempt=claim.attempt, ok=True, result={}, now=now)
        counts = first_seen_counts(approval.tool, str(approval.tier), now=now, latency=now - approval.created_at)
        await store.tallies.add(counts, now=now)
    except EngineError as exc:  # another process counting it right now, a store hiccup: the action goes on
        log.info("first interaction with %s not counted: %s", approval.id, exc.code)
        return False
    return True
