"""What callers ask of the approval service: a proposed action, a decision on an approval, and one decision on a
group of approvals.

Each is one value that surfaces build where a request arrives (a framework adapter, the HTTP API, a Slack click, the
CLI) and pass down whole, instead of a long list of parameters each layer repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.frozen import quick_init
from hitl.engine.domain.grouping import shown_digest
from hitl.engine.domain.hashing import utf8_text
from hitl.engine.domain.models import ApprovalKind, DecisionKind, Reviewer, Tier
from hitl.engine.errors import InvalidInput

__all__ = ["GROUP_KINDS", "MAX_GROUP_MEMBERS", "DecideRequest", "GroupDecideRequest", "GroupMember", "ProposeRequest"]

GROUP_KINDS = frozenset({DecisionKind.APPROVE, DecisionKind.REJECT})
"""What one decision on a group may be: what is the same for every member (an edit, a trust grant, feedback are
each one approval's)."""
MAX_GROUP_MEMBERS = 500
"""The most members one group decision names (a group card holds at most as many)."""


@quick_init
@dataclass(frozen=True)
class ProposeRequest:
    """A tool call someone wants to make: the policy decides whether a person must approve it first.

    Args:
        tool: the tool's name (what the policy knows it by).
        args: the call's arguments, checked against the tool's schema before anything is counted or stored.
        session_id: the session (a run, a conversation) the call belongs to; trust grants are per session.
        requester: who asks (default: the service's ``requester``); a requester never approves their own call.
        evidence: untrusted text a reviewer sees apart from the controls (redacted, bounded, escaped on cards).
        preview: what the call would do, as the caller rendered it (untrusted too).
        min_tier: the least tier the call gets, whatever the policy says (a workflow gate asks at least approve).
        dedupe_key: asking again with the same key returns the same approval (default: session + action hash).
        dedupe_scope: replaces the session in that default (``<scope>:<action hash>``), so a caller that binds an
            approval to something narrower (a step iteration, a framework's call id) need not hash the action.
        metadata: recorded with the approval (a workflow step records its ``step``).
        timeout: seconds before the approval expires (default: the policy's).
        role: forces the approver role (review gates).
        batch: every item of a batch under one approval, bound to the hash of the exact ordered items.
        schema: the JSON Schema sent with the call, checked as well as the one ``hitl.yaml`` declares.
        trusted: the session's trusted tools as the caller read them; only their absence is taken on trust.
        create: False returns the approval a person must give without storing it (a run stores it with its
            checkpoint when it pauses, then announces it).
        kind: what the approval asks; only hitl's own steps ask anything but an action, and only an action's tool
            name is checked against the prefixes those use (:data:`~hitl.engine.domain.models.RESERVED_PREFIXES`).
        named: the caller named this call (a framework's call id, an API idempotency key, a workflow step's
            iteration, a receipt's scope): asking again is the same call, counted once toward velocity and rolling
            sums. An unnamed call is counted each time it is asked (asking again still re-attaches to its pending
            approval, whose count stands for both).
        consequence: the tool's consequence given beside it in Python (an in-process ``ask``, ``guard`` or tool
            gate): what the call will do, computed before a person is asked. Never from the wire (no API, MCP or
            agent field sets it); a ``consequence:`` in ``hitl.yaml`` for the tool wins over it.
        on_behalf_of: the person the agent acts for, known to the surface from a trusted source only (an API
            token's ``acts_for``, the Slack user who started the run, the CLI's signed-in user, the MCP client's
            mapped principal), never from the call's arguments or metadata: the one person who confirms a call at
            tier ``self``. None: nobody is known, and a ``self`` call is asked as ``approve`` (fail closed).
    """

    tool: str
    args: Mapping[str, Any]
    session_id: str
    requester: str | None = None
    evidence: str = ""
    preview: str = ""
    min_tier: Tier = Tier.AUTO
    dedupe_key: str | None = None
    dedupe_scope: str | None = None
    metadata: dict[str, Any] | None = None
    timeout: float | None = None
    role: str | None = None
    batch: list[dict[str, Any]] | None = None
    schema: dict[str, Any] | None = None
    trusted: frozenset[str] | None = None
    create: bool = True
    kind: ApprovalKind = ApprovalKind.ACTION
    named: bool = False
    consequence: Callable[[dict[str, Any]], object] | None = None
    on_behalf_of: str | None = None

    def __post_init__(self) -> None:
        fields = ("tool", "session_id", "requester", "evidence", "preview", "dedupe_key", "dedupe_scope", "role")
        for field in (*fields, "on_behalf_of"):
            utf8_text(field, getattr(self, field))


@quick_init
@dataclass(frozen=True)
class DecideRequest:
    """One person's decision on one approval, as a surface received it.

    Args:
        approval_id: the approval decided.
        reviewer: the person, resolved by the surface (:class:`Reviewer`, with the roles it found), or an id whose
            roles come from the configuration.
        kind: approve, reject, modify, trust or feedback.
        expected_version: the version the person saw; a decision on a changed approval is refused (default: the
            current one, for a caller that names only the id).
        expected_hash: the action hash the person saw (default: the current one).
        reason: why (required where the policy says so; a rejection's reason is shown to the requester).
        args: the edit of a modify: a merge patch onto the current arguments (a field left out keeps its value,
            a field set to null is removed), checked against the approval's schema.
        replace_args: the edit replaces the arguments whole instead (every field must be given).
        via: the channel it came through, as audited (``slack``, ``api:<token>``, ``cli-local``).
        view_digest: the digest of the view the person decided on (:meth:`Presentation.digest`, which the card's
            buttons and the API's approval view carry); the decision's audit entry keeps that view. A digest that
            is not the current view's is refused as stale. None: no view was shown (recorded so).
        confirm: the values the person typed for the arguments the policy asks to confirm (``confirm:``), by name;
            each must be the value that runs (:mod:`~hitl.engine.domain.confirmation`).
    """

    approval_id: str
    reviewer: Reviewer | str
    kind: DecisionKind
    expected_version: int | None = None
    expected_hash: str | None = None
    reason: str | None = None
    args: Mapping[str, Any] | None = None
    via: str = "api"
    replace_args: bool = False
    view_digest: str | None = None
    confirm: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        utf8_text("reason", self.reason)
        utf8_text("approval_id", self.approval_id)

    @property
    def reviewer_id(self) -> str:
        """The deciding person's id."""
        return self.reviewer.id if isinstance(self.reviewer, Reviewer) else self.reviewer


@quick_init
@dataclass(frozen=True)
class GroupMember:
    """One approval of a group decision, as the person saw it.

    Args:
        approval_id: the approval.
        expected_version: the version shown; a member that changed since is refused on its own (``stale_version``).
        expected_hash: the full action hash shown; another is refused on its own (``hash_mismatch``).
    """

    approval_id: str
    expected_version: int
    expected_hash: str


@quick_init
@dataclass(frozen=True)
class GroupDecideRequest:
    """One person's decision on several approvals at once (Slack's Approve all / Reject all, ``POST
    /api/v1/decisions``, ``hitl resume ID ID ...``), bound to the ordered members as shown.

    Each member is decided as a :class:`DecideRequest` of its own, bound to its version and hash, under the same
    rules (roles, quorum, separation of duties); a member that approving takes more than a click for (typed values,
    a reason) is refused in a group.

    Args:
        members: the approvals, in the order shown; none twice, at most :data:`MAX_GROUP_MEMBERS`.
        reviewer: the person (:class:`Reviewer`, or an id whose roles come from the configuration).
        kind: approve or reject (:data:`GROUP_KINDS`).
        reason: why, recorded on every member (a rejection's reason is shown to each requester).
        via: the channel it came through, as audited.
    """

    members: tuple[GroupMember, ...]
    reviewer: Reviewer | str
    kind: DecisionKind
    reason: str | None = None
    via: str = "api"

    def __post_init__(self) -> None:
        if self.kind not in GROUP_KINDS:
            raise InvalidInput(
                f"a group can be approved or rejected, not given {self.kind}: decide that one approval on its own"
            )
        if not self.members or len(self.members) > MAX_GROUP_MEMBERS:
            raise InvalidInput(f"a group decision names 1 to {MAX_GROUP_MEMBERS} approvals, not {len(self.members)}")
        ids = [m.approval_id for m in self.members]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise InvalidInput(f"a group decision names each approval once; {', '.join(twice[:5])} came twice")
        utf8_text("reason", self.reason)

    @property
    def reviewer_id(self) -> str:
        """The deciding person's id."""
        return self.reviewer.id if isinstance(self.reviewer, Reviewer) else self.reviewer

    @property
    def digest(self) -> str:
        """The digest of the members as shown (:func:`~hitl.engine.domain.grouping.shown_digest`: for a Slack group
        card, the one its buttons carry)."""
        return shown_digest([(m.approval_id, m.expected_version, m.expected_hash) for m in self.members])
