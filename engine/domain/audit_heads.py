"""Chain heads: what makes a cut tail visible, and the digest an operator keeps outside the store.

Every audit chain (one per approval, one for the entries that belong to no approval) has a *head*: how many entries
it holds and the link of the newest. The store writes the head in the same atomic step as each entry, so removing
the newest entries of a chain leaves a head that names entries the chain no longer has: ``hitl audit verify`` compares
each head with its chain.

Someone who can rewrite the store could rewrite a head too. ``hitl audit head`` therefore records every head under
one digest (SHA-256 over the sorted heads) and prints it; kept elsewhere (a ticket, a log, a notary), the digest lets
``hitl audit verify --head DIGEST`` prove later that every entry recorded before it is still there, unchanged: each
chain must still hold, at the recorded position, the recorded link, which covers every entry before it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from hitl.engine.domain.presentation import digest_of
from hitl.engine.domain.records import AuditBreak, AuditEntry, chain_link, entry_body

__all__ = [
    "EVENTS",
    "ChainWalk",
    "Head",
    "chain_name",
    "check_anchor",
    "compare_heads",
    "head_digest",
    "view_break",
    "view_problem",
]

EVENTS = ""
"""The key of the chain of entries that belong to no approval (shown as ``events``)."""

Head = tuple[int, str]
"""A chain's head: how many entries it holds, and the newest one's link."""


def view_break(e: AuditEntry) -> str | None:
    """What is wrong with the view a decision's entry keeps, or None (:func:`view_problem`)."""
    return view_problem(e.view, e.view_digest)


def view_problem(view: Mapping[str, Any] | None, view_digest: str | None) -> str | None:
    """What is wrong with a recorded view and its digest, or None (also when neither is recorded: no view was
    shown): a digest without its view, a view without its digest, or a view that is not the one its digest names.
    Checked on the view as stored, never drawn again, so an upgrade that changes how views are drawn leaves every
    recorded view verifiable."""
    if view_digest is None and view is None:
        return None
    if view_digest is None or view is None:
        return "the entry's view and its digest are not both recorded"
    if digest_of(view) != view_digest:
        return "the view recorded with the decision is not the one its digest names"
    return None


def chain_name(chain: str) -> str:
    """How a chain is named to people: its approval id, or ``events``."""
    return chain or "events"


def head_digest(heads: Mapping[str, Head]) -> str:
    """The digest of a set of heads, independent of their order."""
    h = hashlib.sha256()
    for chain in sorted(heads):
        length, link = heads[chain]
        h.update(f"{chain}\t{length}\t{link}\n".encode())
    return h.hexdigest()


def compare_heads(found: Mapping[str, Head], recorded: Mapping[str, Head], checked: int) -> AuditBreak | None:
    """The first chain whose entries disagree with the head the store recorded for it, if any. ``found`` is what a
    walk of the chains saw (empty chains left out), ``recorded`` the heads the store wrote with the entries."""
    for chain in sorted(set(found) | set(recorded)):
        have, want = found.get(chain, (0, "")), recorded.get(chain)
        if want is None:
            if chain == EVENTS:
                continue  # the run-level chain of a store that never recorded a head for it (nothing appended since)
            reason = "its head record is missing (entries were written or copied outside hitl)"
            return AuditBreak(chain=chain_name(chain), position=have[0], reason=reason, checked=checked)
        if have == want:
            continue
        if have[0] < want[0]:
            missing = want[0] - have[0]
            reason = (
                f"its newest {missing} entr{'y was' if missing == 1 else 'ies were'} removed: the head records "
                f"{want[0]} entries, the chain holds {have[0]}"
            )
            return AuditBreak(chain=chain_name(chain), position=have[0] + 1, reason=reason, checked=checked)
        reason = f"the chain does not end where its head says (head: {want[0]} entries, chain: {have[0]})"
        return AuditBreak(chain=chain_name(chain), position=min(have[0], want[0]) + 1, reason=reason, checked=checked)
    return None


def check_anchor(
    digest: str, taken: Mapping[str, Head] | None, links: Mapping[str, list[str]], checked: int
) -> AuditBreak | None:
    """Whether every entry recorded before the head ``digest`` was taken is still there, unchanged.

    ``taken`` is what the store recorded under ``digest`` (None: nothing), ``links`` every chain's links as they are
    now. A recorded head's link must still stand at its position (anywhere, for the run-level chain, whose oldest
    entries retention removes); as each link covers the one before, nothing before it changed either."""
    if taken is None or head_digest(taken) != digest:
        reason = "no head with this digest was taken in this store, or its record was changed"
        return AuditBreak(chain="heads", position=0, reason=reason, checked=checked)
    for chain, (length, link) in sorted(taken.items()):
        have = links.get(chain, [])
        kept = link in have if chain == EVENTS else len(have) >= length and have[length - 1] == link
        if not kept:
            reason = "an entry recorded before the head was taken was removed or changed"
            return AuditBreak(chain=chain_name(chain), position=length, reason=reason, checked=checked)
    return None


class ChainWalk:
    """A walk over the whole audit trail, oldest first, checking each entry against the chain it belongs to: its
    ``prev`` must be the link of the entry before it in that chain (else one was removed or moved), its ``link``
    must cover its content (else it was changed). Every store feeds it its entries in order, however it reads
    them; what the walk saw then goes to :func:`compare_heads` and :func:`check_anchor`.

    Args:
        anchor: the link the run-level chain starts after (the anchor its latest purge entry names; '' before).
    """

    def __init__(self, anchor: str) -> None:
        self._last: dict[str, tuple[str, int]] = {EVENTS: (anchor, 0)}
        self.links: dict[str, list[str]] = {}
        """Every chain's links, in order."""
        self.checked = 0
        """Entries that held so far."""

    def step(self, e: AuditEntry) -> AuditBreak | None:
        """Check ``e``, the next entry in the trail: the break it shows, or None."""
        key = e.approval_id or EVENTS
        prev, position = self._last.get(key, ("", 0))
        position += 1
        if e.prev != prev:
            reason = "an entry before it was removed or moved"
            return AuditBreak(chain=chain_name(key), position=position, reason=reason, checked=self.checked)
        if e.link != chain_link(e.prev, entry_body(e)):
            reason = "the entry was changed"
            return AuditBreak(chain=chain_name(key), position=position, reason=reason, checked=self.checked)
        wrong_view = view_break(e)
        if wrong_view is not None:
            return AuditBreak(chain=chain_name(key), position=position, reason=wrong_view, checked=self.checked)
        self._last[key] = (e.link, position)
        self.links.setdefault(key, []).append(e.link)
        self.checked += 1
        return None

    def found(self) -> dict[str, Head]:
        """Each chain the walk saw, as a head: its length and newest link."""
        return {k: (len(v), v[-1]) for k, v in self.links.items()}
