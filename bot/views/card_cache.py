"""Rendered review cards, one per approval version: every update of the same version reuses the blocks.

An approval's card changes only when the approval does (each change is a new version), when the stop switch's order
covering its tool changes, when its receipts are withdrawn or spent (neither makes a new version), and, in its
"Expires" field, when the minutes left read differently. Those are the key;
anything else about a version is fixed once it is stored. A card is posted, then brought up to date by a queue
that may run several times for one version (a change seen twice, a halt order given and lifted, a replica taking
over the queue): each of those renders nothing new.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from hitl.bot.views.arguments import Declared
from hitl.bot.views.blocks import card, expires_in, relative
from hitl.bot.views.withdrawal import ReceiptsShown
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval
from hitl.engine.domain.presentation import Presentation

__all__ = ["CardCache"]

_Key = tuple[str, int, float, str, HaltOrder | None, ReceiptsShown | None]


class CardCache:
    """The last ``size`` cards rendered, by approval version (a card's blocks run to ~15 KB; the updates of one
    version come close together, so a few recent ones are enough). One per store: an approval's id and version
    name one state only within its store (its creation time tells a purged and re-created approval apart).

    The blocks handed out are shared between the updates of one version: callers send them, never change them.
    """

    def __init__(
        self,
        size: int = 128,
        *,
        declared: Declared | None = None,
        view_of: Callable[[Approval], Presentation] | None = None,
        page_of: Callable[[str], str] | None = None,
    ) -> None:
        self.size = size
        self.declared = declared
        """Each tool's declared schema (the cards' labels, help and currency), or None for none."""
        self.view_of = view_of
        """Each approval's one view, with the served hitl.yaml's sentences (None: built from the approval)."""
        self.page_of = page_of
        """Each approval's page in the web inbox, by id (None: no web inbox, no link)."""
        self.rendered = 0
        """Cards rendered (the rest were reused)."""
        self.reused = 0
        self._cards: OrderedDict[_Key, list[dict[str, Any]]] = OrderedDict()
        self._drawn: OrderedDict[tuple[str, int], Approval] = OrderedDict()

    def card(
        self, a: Approval, *, now: float, halt: HaltOrder | None = None, receipts: ReceiptsShown | None = None
    ) -> list[dict[str, Any]]:
        """``a``'s live card as of ``now`` (see :func:`hitl.bot.views.blocks.card`). ``receipts`` is part of the
        key: a withdrawal (or a redeem) changes the card without a new version of the approval."""
        key: _Key = (a.id, a.version, a.created_at, expires_in(a, now) + _handed(a, now), halt, receipts)
        found = self._cards.get(key)
        if found is not None:
            self._cards.move_to_end(key)
            self.reused += 1
            return found
        schema = self.declared(a.tool) if self.declared is not None else None
        view = self.view_of(a) if self.view_of is not None else None
        page = self.page_of(a.id) if self.page_of is not None else None
        blocks = card(a, now=now, halt=halt, declared=schema, view=view, page=page, receipts=receipts)
        self.rendered += 1
        self._cards[key] = blocks
        self._drawn[(a.id, a.version)] = a
        if len(self._cards) > self.size:
            self._cards.popitem(last=False)
        if len(self._drawn) > self.size:
            self._drawn.popitem(last=False)
        return blocks

    def drawn(self, approval_id: str, version: int) -> Approval | None:
        """The approval a recent card of this version was drawn from, or None. A click on that card is decided
        on it without reading it again: an approval's id and version name one state (the store's atomic step
        still checks both, so a purged and re-created approval, or a stale card, is refused there)."""
        return self._drawn.get((approval_id, version))


def _handed(a: Approval, now: float) -> str:
    """What the card's Approvers field says of a hand-on as of ``now`` (it reads differently as time passes)."""
    if a.backup_role is None or a.hand_on_at is None:
        return ""
    return f"|{relative(a.hand_on_at, now)}|{a.handed_on(now)}"
