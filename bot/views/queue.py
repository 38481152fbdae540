"""An approval as one entry of a queue a reviewer reads (the Home tab, ``/hitl pending``), in two lines: its
sentence in bold, marked when an argument could fool the eye; then its tier by an icon and a word, why it ranks
there with the time left said once, and how to act (a link to its card and its id, else the command that shows
it). Everything from the agent (the sentence, an argument's name) is escaped like on the card."""

from __future__ import annotations

from hitl.bot.views.escape import label
from hitl.bot.views.marks import look_closely_text
from hitl.engine.domain.models import Approval, Tier
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.ranking import why_ranked

__all__ = ["TIER_ICONS", "queue_entry"]

TIER_ICONS = {
    Tier.ESCALATE: ":rotating_light:",
    Tier.APPROVE: ":ballot_box_with_check:",
    Tier.SELF: ":bust_in_silhouette:",
    Tier.NOTIFY: ":information_source:",
    Tier.AUTO: ":gear:",
}
"""An icon per tier, beside its word: no two tiers wear the same one in a list."""


def queue_entry(a: Approval, *, view: Presentation, now: float, link: str | None) -> str:
    """``a`` in two mrkdwn lines (see the module docstring). ``view``: its one view (the card's headline and
    marks); ``link``: its card's permalink (None while it has none)."""
    mark = ":warning: " if view.look_closely else ""
    votes = f" · {len(a.approvers)} of {a.quorum} approvals" if a.quorum > 1 else ""
    act = f"<{link}|Open the card> · `{a.id}`" if link else f"`/hitl show {a.id}`"  # the id for /hitl approve
    look = f" · {look_closely_text(view.look_closely)}" if view.look_closely else ""
    return f"{mark}*{label(view.headline, 150)}*\n{TIER_ICONS[a.tier]} {why_ranked(a, now=now)}{votes} · {act}{look}"
