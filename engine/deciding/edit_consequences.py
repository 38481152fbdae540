"""What will happen after a Modify: the tool's consequence computed again for the edited arguments (what will run),
under the same bounds and audited, as a proposal's is. An edit approved as it stands keeps it on its decision
(:attr:`~hitl.engine.domain.models.Approval.will_happen`); an edit that needs other approvers asks them with it on
the approval that replaces the original, as a fresh proposal would."""

from __future__ import annotations

import time
from typing import Any, Protocol

from hitl.engine.consequences.callables import ConsequenceFn
from hitl.engine.domain.models import Approval

__all__ = ["ComputingService", "edit_consequence"]


class ComputingService(Protocol):
    """What computing an edit's consequence uses of the service that decides."""

    async def consequence_of(
        self, approval: Approval, *, given: ConsequenceFn | None = None, within: float | None = None
    ) -> Approval:
        """``approval`` with its tool's consequence computed (audited), in at most ``within`` seconds."""
        ...


async def edit_consequence(
    service: ComputingService,
    current: Approval,
    new_args: dict[str, Any],
    replacement: Approval | None,
    *,
    answer_by: float | None,
) -> Approval:
    """``replacement`` when the edit of ``current`` needs other approvers, else ``current`` with ``new_args``, with
    the consequence of ``new_args``. A surface that must answer by ``answer_by`` (a wall-clock instant: Slack's
    window) leaves it half the time left at most, so the decision is recorded in time, without the consequence
    (timed out) if it takes longer."""
    base = replacement if replacement is not None else current.model_copy(update={"args": new_args})
    within = (answer_by - time.time()) / 2 if answer_by is not None else None
    # It holds the original's, so a tool whose consequence this process cannot run says so rather than show that one.
    return await service.consequence_of(base.model_copy(update={"consequence": current.consequence}), within=within)
