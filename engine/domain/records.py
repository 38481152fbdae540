"""Records the stores keep besides approvals: claims, audit entries, trust grants, pages, message refs."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.hashing import canonical_json
from hitl.engine.domain.models import Approval

__all__ = [
    "AuditBreak",
    "AuditEntry",
    "Claim",
    "ClaimState",
    "Issued",
    "Job",
    "MessageRef",
    "Page",
    "UNCHAINED",
    "TrustGrant",
    "chain_link",
    "entry_body",
    "unchained_fields",
]


class _Rec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClaimState(StrEnum):
    """Where one execution claim stands: running, or finished one way or the other."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Claim(_Rec):
    """An execution claim under an idempotency key.

    Recovery rule: a ``running`` claim whose lease has passed (its holder stopped renewing, e.g. it died)
    may be taken over by the next claimant, which gets ``attempt + 1``. The old holder is fenced: its
    outcome is refused. The effect receives the idempotency key, so a tool that deduplicates on it (as the
    example's does, like Stripe's API) never applies the effect twice even when the first holder died
    after the effect but before recording it.
    """

    key: str
    action_hash: str
    holder: str
    attempt: int
    state: ClaimState
    lease_until: float
    result: dict[str, Any] | None = None
    acquired: bool = False
    """True when the caller of ``claim`` now holds it and must execute."""
    recovered: bool = False
    """True when this claim took over from a holder whose lease expired."""


class AuditEntry(_Rec):
    """One append-only audit line. Evidence never goes here."""

    at: float
    actor: str
    event: str
    """created, decided, refused, expired, cancelled, superseded, claimed, executed, failed, trust_granted, ..."""
    approval_id: str | None = None
    version: int | None = None
    action_hash: str | None = None
    outcome: str = "ok"
    """``ok`` or an error code."""
    detail: str = ""
    view_digest: str | None = None
    """A decision's: the digest of the view its decider was shown (None: no view was shown)."""
    view: dict[str, Any] | None = None
    """A decision's: that view, canonical (:meth:`~hitl.engine.domain.presentation.Presentation.canonical`), so a
    later dispute can see what was shown; ``hitl audit verify`` checks it against ``view_digest``."""
    seq: int = 0
    prev: str = ""
    """The link of the entry before this one in its chain (empty for the first)."""
    link: str = ""
    """SHA-1 of ``prev`` and this entry's content: editing, removing or reordering an entry breaks the chain."""


UNCHAINED = frozenset({"seq", "prev", "link"})
"""An entry's position and links: what its link does not cover."""
_ABSENT_WHEN_NONE = ("view_digest", "view")
"""Fields added after entries were first chained: left out of the body while unset, so every older entry keeps the
body (and the link) it was written with."""


def unchained_fields(e: AuditEntry) -> set[str]:
    """The fields of ``e`` its link does not cover: its position and links, and the later fields it leaves unset."""
    return set(UNCHAINED) | {name for name in _ABSENT_WHEN_NONE if getattr(e, name) is None}


def entry_body(e: AuditEntry) -> str:
    """What an entry's link covers: every field it records (not its position or its links)."""
    return canonical_json(e.model_dump(exclude=unchained_fields(e)))


def chain_link(prev: str, body: str) -> str:
    """The link of an audit entry whose content is ``body``, after the entry whose link is ``prev``.

    SHA-1, because it is the digest Redis scripts can compute inside the same atomic step that writes the entry.
    A chain makes the log tamper-evident (an edit, a removal or a reordering is detected); it is not a signature:
    someone who can rewrite the whole store can rewrite the chain too.
    """
    return hashlib.sha1(f"{prev}\n{body}".encode(), usedforsecurity=False).hexdigest()


class AuditBreak(_Rec):
    """The first broken link found by ``hitl audit verify``."""

    chain: str
    """The approval id whose entries form the chain, or ``events`` for entries that belong to no approval."""
    position: int
    """1-based position of the first entry that does not link."""
    reason: str
    checked: int
    """Entries checked before the break."""


class TrustGrant(_Rec):
    """Trust in one tool for one requester in one session until ``until``: that requester's calls of the tool in
    that session skip review (granted by a reviewer's Trust). Another identity in the same session, or the same
    identity in another session, is not covered."""

    session_id: str
    requester: str
    """The identity the grant covers: the requester of the approval that was trusted."""
    tool: str
    granted_by: str
    until: float


class Issued(_Rec):
    """The record of a receipt issued: its ``jti``, the execution it was issued for (claim key and attempt), and
    when it expires."""

    jti: str
    key: str
    exp: float
    audit: AuditEntry | None = None
    """A receipt of an approved action, as it is issued: its ``receipt_issued`` audit entry, which the claim's
    atomic step appends with the record. The entry's approval, withdrawn, refuses that claim instead
    (``action_rejected``: nothing is claimed or recorded). None for a call run without a person, and on a record
    read back."""


class MessageRef(_Rec):
    """Where a card was posted in Slack (channel and message timestamp), so it can be updated."""

    channel: str
    ts: str


class Page(_Rec):
    """One page of approvals, and the cursor to the next one."""

    items: list[Approval] = Field(default_factory=list)
    cursor: str | None = None
    """Pass back to get the next page; None at the end."""


class Job(_Rec):
    """A durable background job (e.g. resume a run after a decision), delivered at least once."""

    id: str
    kind: str
    payload: dict[str, Any]
    attempts: int = 1
