"""The reviewer's inbox: the app's Home tab as a Block Kit ``home`` view. Pure: no I/O, time passed in.

Three parts, each bounded: what the viewer may decide now, the most important first (the card's sentence, why it
ranks there, how long it has waited, when it expires, a link to the card; how many wait in all), what they decided
lately, and the trust grants in force. Everything that came from an agent (tool names, sentences, sessions) is
escaped like on the card.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hitl.bot.views.blocks import halt_notice, relative, when, who
from hitl.bot.views.escape import label
from hitl.bot.views.queue import queue_entry
from hitl.engine.domain.consequences import WHAT_WILL_HAPPEN
from hitl.engine.domain.delegation import Delegation, utc_text
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval, Decision, DecisionKind
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.domain.ranking import waiting_text
from hitl.engine.domain.records import TrustGrant

__all__ = [
    "HOME_DECIDED",
    "HOME_DELEGATION",
    "HOME_HALTED",
    "HOME_TRUST",
    "HOME_WAITING",
    "Waiting",
    "delegation_lines",
    "home_view",
]

HOME_WAITING = "hitl_home_waiting"
HOME_DECIDED = "hitl_home_decided"
HOME_TRUST = "hitl_home_trust"
HOME_HALTED = "hitl_home_halted"
HOME_DELEGATION = "hitl_home_delegation"
"""Block id prefixes of the parts (tests and the sandbox find them by these)."""
SHOWN = 15
"""At most this many items per part: the view stays well inside Slack's 100 blocks."""

_VERBS = {
    DecisionKind.APPROVE: "Approved",
    DecisionKind.REJECT: "Rejected",
    DecisionKind.MODIFY: "Modified and approved",
    DecisionKind.TRUST: "Approved and trusted",
    DecisionKind.FEEDBACK: "Sent feedback on",
}


@dataclass(frozen=True, slots=True)
class Waiting:
    """An approval the viewer may decide now, and the link to its card (None while it has no card)."""

    approval: Approval
    link: str | None


def home_view(
    viewer: str,
    *,
    waiting: Sequence[Waiting],
    more_waiting: bool,
    waiting_count: int | None = None,
    decided: Sequence[tuple[Approval, Decision]],
    grants: Sequence[TrustGrant],
    now: float,
    halts: Sequence[HaltOrder] = (),
    view_of: Callable[[Approval], Presentation] = present,
    given: Delegation | None = None,
    received: Sequence[Delegation] = (),
) -> dict[str, Any]:
    """The Home tab ``viewer`` sees: a ``views.publish`` view. ``waiting``: the first of what they may decide, the
    most important first; ``waiting_count``: how many in all (when known). ``halts``: the stop switch's orders in
    force, first. ``view_of``: each approval's one view (its headline is the card's). ``given``: the delegation the
    viewer gave, ``received``: those handed to them, in force (next, so neither side is ever unaware of one)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Your approvals", "emoji": False}},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"For {who(viewer)} · updated {when(now)}"}],
        },
    ]
    for i, order in enumerate(halts[:SHOWN]):
        blocks.append(_section(f"{HOME_HALTED}:{i}", f"{halt_notice(order)} ({relative(order.at, now)})"))
    for i, line in enumerate(delegation_lines(given, received, now)):
        blocks.append(_section(f"{HOME_DELEGATION}:{i}", line))
    if not waiting:
        blocks.append(_heading("Nothing is waiting for you"))
    elif waiting_count is not None:
        blocks.append(_heading(f"{waiting_text(waiting_count)} · the most important first"))
    else:
        blocks.append(_heading(f"Waiting for you ({len(waiting)}{'+' if more_waiting else ''})"))
    for i, w in enumerate(waiting[:SHOWN]):
        blocks.append(_waiting(w, now, i, view_of(w.approval)))
    if more_waiting or len(waiting) > SHOWN:
        blocks.append(_note("More are waiting: `/hitl pending` pages through all of them."))
    blocks += [{"type": "divider"}, _heading("Decided by you lately")]
    if not decided:
        blocks.append(_note("Nothing yet."))
    for i, (a, d) in enumerate(decided[:SHOWN]):
        line = f"{_VERBS[d.kind]} *{_what(view_of(a))}* {relative(d.at, now)} via {label(d.via, 20)}"
        blocks.append(_section(f"{HOME_DECIDED}:{i}", line))
    blocks += [{"type": "divider"}, _heading("Trust in force")]
    if not grants:
        blocks.append(_note("No tool you review is trusted right now."))
    for i, g in enumerate(grants[:SHOWN]):
        line = (
            f"`{label(g.tool, 60)}` called by `{label(g.requester, 60)}` in session `{label(g.session_id, 60)}` runs "
            "without review until "
            f"{when(g.until)} ({relative(g.until, now)}), granted by {who(g.granted_by)}"
        )
        blocks.append(_section(f"{HOME_TRUST}:{i}", line))
    return {"type": "home", "blocks": blocks}


def delegation_lines(given: Delegation | None, received: Sequence[Delegation], now: float) -> list[str]:
    """What a person is told of the delegations that concern them (the Home tab, ``/hitl delegations``)."""
    lines = []
    if given is not None:
        what = f"the role `{label(given.role, 60)}`" if given.role else "your reviewer roles"
        lines.append(
            f":handshake: You delegated {what} to {who(given.delegate)} until {utc_text(given.until)} "
            f"({relative(given.until, now)}). `/hitl delegate end` ends it now."
        )
    for d in received[:SHOWN]:
        what = f"the role `{label(d.role, 60)}`" if d.role else "their reviewer roles"
        lines.append(
            f":handshake: You act for {who(d.delegator)} with {what} until {utc_text(d.until)} "
            f"({relative(d.until, now)}): a decision you make with it counts as theirs too, and you decide nothing "
            "they asked for."
        )
    return lines


def _what(view: Presentation) -> str:
    """The approval in a few words, as the card's headline says it (escaped: the sentence carries arguments)."""
    return label(view.headline, 150)


def _waiting(w: Waiting, now: float, i: int, view: Presentation) -> dict[str, Any]:
    a = w.approval
    entry = queue_entry(a, view=view, now=now, link=w.link)  # time left said once, in why it ranks there
    will = f"\n:crystal_ball: {WHAT_WILL_HAPPEN}: `{label(view.consequence.headline, 150)}`" if view.consequence else ""
    if view.drift is not None:  # hitl's words only: what was approved is on the card
        will = f"\n:warning: Asked again: what will happen changed after approval (drift {view.drift.count}){will}"
    return _section(f"{HOME_WAITING}:{i}", f"{entry}{will}\nAsked {relative(a.created_at, now)} by {who(a.requester)}")


def _heading(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": f"*{text}*"}}


def _section(block_id: str, text: str) -> dict[str, Any]:
    return {"type": "section", "block_id": block_id, "text": {"type": "mrkdwn", "text": text[:2900], "verbatim": True}}


def _note(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}
