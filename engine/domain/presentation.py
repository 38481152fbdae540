"""One view of an approval: what every surface shows a person about it, built once here and only drawn by each
surface (the Slack card and Home tab, ``/hitl show``, ``hitl show``, the API, webhooks). Pure: no I/O, no clock.

The story is the same everywhere and after every change: the headline is the tool's ``summary:`` sentence for the
arguments as they will run (rendered again after a Modify), else the tool's name; the reasons are the policy's
plain words; each argument is a :class:`~hitl.engine.domain.display.Shown` value under its name (and its title,
help and currency from the declared schema alone); an edit shows before and after; the outcome says, in one line,
how it ended, and what became of an edit that went to other approvers.

:meth:`Presentation.canonical` is the view as data with no relative time in it, and a renderer version, so a
digest of it names exactly what a person was shown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.consequences import Consequence
from hitl.engine.domain.display import Shown, graphemes_cut, reveal, show
from hitl.engine.domain.drift import DRIFTED, ConsequenceDrift
from hitl.engine.domain.edits import edit_of
from hitl.engine.domain.frozen import quick_init
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Status
from hitl.engine.domain.spot_checks import checked_tool, is_spot_check

__all__ = [
    "DECISION_VERBS",
    "NO_VIEW",
    "RENDERER",
    "STATE_TITLES",
    "Change",
    "Field",
    "Presentation",
    "Summarize",
    "digest_of",
    "look_closely",
    "present",
]

RENDERER = "hitl-view/1"
"""The version of what :func:`present` builds; recorded in every canonical view, so a view shown by an older hitl
still names itself after an upgrade changes how views are built."""

NO_VIEW = "no view shown"
"""What a decision's audit entry says when its decider was shown no view (a CLI or API decision that named none)."""

Summarize = Callable[[str, Mapping[str, Any]], str | None]
"""A tool's ``summary:`` sentence for some arguments (None without a template, or when it fails on them)."""

STATE_TITLES = {
    Status.PENDING: "Approval needed",
    Status.APPROVED: "Approved",
    Status.REJECTED: "Rejected",
    Status.EXPIRED: "Expired",
    Status.CANCELLED: "Cancelled",
    Status.SUPERSEDED: "Superseded",
    Status.EXECUTING: "Approved, running",
    Status.EXECUTED: "Approved and done",
    Status.FAILED: "Approved, but it failed",
}
"""Each state in a reviewer's words (a card's title, a notification's first words)."""
_IN_DOUBT = (
    "The worker running it stopped before recording its outcome.",
    "Check the system it acts on, then Mark done (it happened), Run again (it did not) or Stop the run.",
)
"""Why an effect in doubt needs a person (its own reasons are those of the call it asks about)."""
_SPOT_TITLES = {Status.PENDING: "Spot check", Status.APPROVED: "Looks right", Status.REJECTED: "Flagged"}
DECISION_VERBS = {
    DecisionKind.APPROVE: "approved",
    DecisionKind.REJECT: "rejected",
    DecisionKind.MODIFY: "modified and approved",
    DecisionKind.TRUST: "approved and trusted the tool for this session",
    DecisionKind.FEEDBACK: "sent feedback",
}
"""What each decision did, in a reviewer's words ("U1 approved")."""


@quick_init
@dataclass(frozen=True)
class Field:
    """One argument as it will run: its name, the declared schema's title, help and currency (None without one),
    and its value as shown."""

    name: str
    value: Shown
    title: str | None = None
    help: str | None = None
    currency: str | None = None

    @property
    def label(self) -> str:
        """What a person reads the argument by: its declared title, else its name."""
        return self.title or self.name


@quick_init
@dataclass(frozen=True)
class Change:
    """One argument a reviewer's edit changed: before and after, as shown."""

    name: str
    before: Shown
    after: Shown


@quick_init
@dataclass(frozen=True)
class Presentation:
    """An approval as every surface shows it (see the module docstring)."""

    approval_id: str
    version: int
    action_hash: str
    tool: str
    status: Status
    title: str
    """The state in words: "Approval needed", "Approved and done", "Flagged", ..."""
    headline: str
    """What it is about: the summary sentence for the arguments as they run, else the tool's name."""
    requester: str
    role: str | None
    quorum: int
    approvals: int
    expires_at: float
    reasons: tuple[str, ...]
    """Why a person decides, in the policy's plain words (the same lines on every surface)."""
    fields: tuple[Field, ...]
    changes: tuple[Change, ...]
    outcome: str | None
    """How it ended, in one line (None while pending): who decided, and what became of an edit."""
    evidence: str
    consequence: Consequence | None = None
    """What will happen, as the tool's own consequence computed it (or why it was not): untrusted output, drawn
    apart from hitl's labels (None: the tool declares no consequence)."""
    drift: ConsequenceDrift | None = None
    """Why it asks again: the approved one's consequence drifted before it ran (what was approved is shown above
    what will happen now); None when asked the first time."""

    @property
    def heading(self) -> str:
        """The title and the headline, as a card's header reads ("Approval needed: Refund ..."); a headline that
        already says its state ("Did it happen? refund") alone."""
        return self.headline if self.headline.startswith(self.title) else f"{self.title}: {self.headline}"

    @property
    def look_closely(self) -> str | None:
        """What could fool the eye in the arguments, in one line for a surface that shows the headline without
        them (the card's top, a Home or ``/hitl pending`` line): :func:`look_closely`. None when nothing could."""
        return look_closely((f.label, f.value.marks) for f in self.fields)

    def canonical(self) -> dict[str, Any]:
        """The view as plain data, with no relative time, and the renderer that built it."""
        return {
            "renderer": RENDERER,
            "approval_id": self.approval_id,
            "version": self.version,
            "action_hash": self.action_hash,
            "tool": self.tool,
            "status": str(self.status),
            "title": self.title,
            "headline": self.headline,
            "heading": self.heading,
            "requester": self.requester,
            "role": self.role,
            "quorum": self.quorum,
            "approvals": self.approvals,
            "expires_at": self.expires_at,
            "reasons": list(self.reasons),
            "fields": [
                {
                    "name": f.name,
                    "label": f.label,
                    "help": f.help,
                    "currency": f.currency,
                    "kind": str(f.value.kind),
                    "text": f.value.text,
                    "length": f.value.length,
                    "warnings": list(f.value.warnings),
                }
                for f in self.fields
            ],
            "changes": [{"name": c.name, "before": c.before.text, "after": c.after.text} for c in self.changes],
            "outcome": self.outcome,
            # The evidence by its digest and length, never its text: the canonical view is kept in the audit trail,
            # where untrusted (possibly personal) text does not go; the digest still names what was shown.
            "evidence": {"sha256": hashlib.sha256(self.evidence.encode()).hexdigest(), "length": len(self.evidence)},
            # Like the evidence, by its digest (RFC 8785) and how it ended; only when the tool has one, so the views
            # of approvals without one keep the form (and the digest) they always had.
            **(
                {"consequence": {"outcome": str(self.consequence.outcome), "sha256": self.consequence.digest()}}
                if self.consequence is not None
                else {}
            ),
            **(
                {"drift": {"of": self.drift.of, "count": self.drift.count, "seen_sha256": self.drift.seen.digest()}}
                if self.drift is not None
                else {}
            ),
        }

    def digest(self) -> str:
        """The digest of :meth:`canonical` (:func:`digest_of`): names exactly what was shown."""
        return self.recorded()[1]

    def recorded(self) -> tuple[dict[str, Any], str]:
        """:meth:`canonical` and its digest, the canonical form built once (what a record of the view keeps)."""
        canonical = self.canonical()
        return canonical, digest_of(canonical)


def digest_of(canonical: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a canonical view's JSON (sorted keys, no spaces, non-ASCII as is). A view kept in the audit
    trail is checked with this against the digest recorded beside it, whichever renderer built it."""
    encoded = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


def look_closely(marked: Iterable[tuple[str, Sequence[str]]], *, most: int = 3) -> str | None:
    """Each argument's marks (:attr:`~hitl.engine.domain.display.Shown.marks`) in one line, by its label: "look
    closely: site: look-alike letters; limit: text that reads as a number" (the first ``most``, then how many more);
    None when no argument has one. A label is an argument's name (the agent's): cut and its hidden characters
    marked here, escaped by each surface like any argument."""
    parts = [f"{reveal(graphemes_cut(name, 40))[0]}: {', '.join(marks)}" for name, marks in marked if marks]
    if not parts:
        return None
    more = f"; and {len(parts) - most} more" if len(parts) > most else ""
    return "look closely: " + "; ".join(parts[:most]) + more


def present(
    a: Approval, *, summarize: Summarize | None = None, declared: Mapping[str, Any] | None = None
) -> Presentation:
    """The one view of ``a``. ``summarize``: the tool's summary sentence for other arguments (after a Modify the
    headline reads the edited values; without it, an edited approval's headline is the tool's name, never the
    sentence of arguments that no longer run). ``declared``: the tool's schema in ``hitl.yaml``."""
    props = (declared or {}).get("properties")
    specs: Mapping[str, Any] = props if isinstance(props, dict) else {}
    fields = tuple(_field(name, value, specs.get(name)) for name, value in a.execute_args.items())
    changes = tuple(Change(name, show(before), show(after)) for name, (before, after) in edit_of(a).items())
    return Presentation(
        approval_id=a.id,
        version=a.version,
        action_hash=a.action_hash,
        tool=a.tool,
        status=a.status,
        title=_title(a),
        headline=_headline(a, summarize),
        requester=a.requester,
        role=a.required_role,
        quorum=a.quorum,
        approvals=len(a.approvers),
        expires_at=a.expires_at,
        reasons=_IN_DOUBT if a.kind is ApprovalKind.DOUBT else tuple(a.why or a.reasons),
        fields=fields,
        changes=changes,
        outcome=_outcome(a),
        evidence=a.evidence,
        consequence=a.will_happen,
        drift=a.drift,
    )


def _field(name: str, value: Any, spec: Any) -> Field:
    spec = spec if isinstance(spec, dict) else {}

    def text(key: str) -> str | None:
        found = spec.get(key)
        return found.strip() if isinstance(found, str) and found.strip() else None

    title = text("title")
    return Field(
        name, show(value, declared=spec), title if title != name else None, text("description"), text("x-currency")
    )


def _headline(a: Approval, summarize: Summarize | None) -> str:
    if a.kind is ApprovalKind.DOUBT:  # the effect it asks about
        return f"Did it happen? {a.args.get('tool') or a.tool.removeprefix(f'{ApprovalKind.DOUBT}:')}"
    if is_spot_check(a):
        return a.summary or checked_tool(a)
    if a.approved_args is None:
        return a.summary or a.tool
    again = summarize(a.tool, a.approved_args) if summarize is not None else None
    return again or a.tool  # the sentence of the edited arguments, never the one of arguments that will not run


def _title(a: Approval) -> str:
    if is_spot_check(a):
        return _SPOT_TITLES.get(a.status, f"Spot check {a.status}")
    if a.kind is ApprovalKind.DOUBT and a.status is Status.PENDING:
        return "Did it happen?"
    return STATE_TITLES[a.status]


def _outcome(a: Approval) -> str | None:
    """The story's last line: who ended it and how, and what became of an edit that needed other approvers."""
    if a.status is Status.PENDING:
        return None
    last = a.decisions[-1] if a.decisions else None
    if a.status is Status.SUPERSEDED and last is not None and last.kind is not DecisionKind.MODIFY:
        return f"Approved, then what will happen changed before it ran: nothing ran, asked again as {a.superseded_by}"
    if a.status is Status.SUPERSEDED:
        who = last.reviewer if last is not None else "a reviewer"
        return f"{who} edited it; the edit needs other approvers and went on as {a.superseded_by}"
    if a.status is Status.EXPIRED and (a.reason or "").startswith(DRIFTED):
        return "Expired as drifted: what will happen changed 3 times in a row before it ran; nothing ran"
    if a.status is Status.EXPIRED:
        return "Expired without a decision"
    if a.status is Status.CANCELLED:
        return f"Cancelled: {a.reason}" if a.reason else "Cancelled"
    if last is None:
        return STATE_TITLES[a.status]
    if is_spot_check(a):
        said = "said it looks right" if last.kind is DecisionKind.APPROVE else "flagged it"
        return f"{last.reviewer} {said}" + (f": {a.reason}" if a.reason else "")
    said = DECISION_VERBS[last.kind]
    return f"{last.reviewer} {said}" + (f": {a.reason}" if a.reason and last.kind is not DecisionKind.APPROVE else "")
