"""The web inbox's oversight page (``GET /inbox/oversight``), for the admin role (``oversight.admin_role``) only:
the figures per reviewer as ``hitl reviewers`` computes them, the practice catch rate with its 95% interval, and who
approved what, in the audit trail's own words. Refused (403) to anyone else, and to everyone when hitl.yaml defines
no admin role (fail closed: nobody holds it)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from hitl.api.context import ApiContext
from hitl.api.problems import ApiError
from hitl.engine.domain.durations import parse_duration
from hitl.engine.domain.intervals import wilson
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.reviewer_figures import ReviewerFigures, by_reviewer
from hitl.engine.errors import ErrorCode
from hitl.engine.storage.paging import recent_since

from .pages import _utc, layout

__all__ = ["APPROVING", "AUDIT_READ", "Oversight", "oversight", "oversight_page"]

APPROVING = ("approve ", "trust ", "modify ")
"""How a ``decided`` entry's detail starts when the decision let the action go on."""
AUDIT_READ = 5000
"""The newest audit entries read for "who approved what" (the page says when the period reaches past them)."""
_MAX_WINDOW = 90 * 86400.0


@dataclass(frozen=True)
class Oversight:
    """What the oversight page shows for one period."""

    since: float
    figures: list[ReviewerFigures]
    caught: int
    missed: int
    approvals: list[AuditEntry]
    """The ``decided`` entries that approved, oldest first."""
    cut: bool
    """Whether the audit entries read began inside the period (older approvals are not listed)."""


async def _admin(ctx: ApiContext, reviewer: str) -> None:
    config = ctx.config.current()[0]
    who = await ctx.lifecycle.contexts.default.service.reviewers.reviewer(reviewer)
    if config.may_halt(who.roles) is not True:
        role = config.oversight.admin_role
        raise ApiError(
            403,
            str(ErrorCode.NOT_ELIGIBLE),
            f"only the {role} role may see the oversight figures (hitl.yaml oversight.admin_role); ask an admin",
        )


async def oversight(ctx: ApiContext, reviewer: str, since: str, *, now: float) -> Oversight:
    """The figures since ``since`` ago (``7d``, ``24h``), for ``reviewer`` when they hold the admin role."""
    await _admin(ctx, reviewer)
    try:
        window = parse_duration(since)
    except ValueError as exc:
        raise ApiError(400, str(ErrorCode.INVALID_INPUT), f"since: {exc}") from None
    if not 0 < window <= _MAX_WINDOW:
        raise ApiError(400, str(ErrorCode.INVALID_INPUT), "since: give a period from 1s to 90d, like 7d")
    start = now - window
    # As `hitl reviewers` reads them: approvals made up to one period earlier may hold decisions made in this one.
    figures = by_reviewer(await recent_since(ctx.lifecycle.store.approvals, start - window), since=start)
    entries = await ctx.lifecycle.store.audit.entries(limit=AUDIT_READ)
    approved = [e for e in entries if e.event == "decided" and e.at >= start and e.detail.startswith(APPROVING)]
    cut = len(entries) == AUDIT_READ and entries[0].at > start
    caught = sum(f.practice_caught for f in figures)
    missed = sum(f.practice_missed for f in figures)
    return Oversight(start, figures, caught, missed, approved, cut)


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _rate(hits: int, n: int) -> str:
    interval = wilson(hits, n)
    if interval is None:
        return "no practice approval decided in this period"
    low, high = interval
    return f"{hits} caught of {n} ({hits / n:.0%}; 95% interval {low:.0%} to {high:.0%})"


def _figures(rows: list[ReviewerFigures]) -> str:
    if not rows:
        return "<p>No decisions in this period.</p>"
    heads = ("Reviewer", "Decided", "Corrected", "Practice caught", "Practice missed", "Spot checks", "Flagged")
    head = "".join(f'<th scope="col">{h}</th>' for h in heads)
    body = "".join(
        f'<tr><th scope="row">{_e(f.reviewer)}</th><td>{f.decisions}</td><td>{f.corrections}</td>'
        f"<td>{f.practice_caught}</td><td>{f.practice_missed}</td><td>{f.spot_checks}</td><td>{f.spot_flags}</td></tr>"
        for f in rows
    )
    # The table scrolls inside its own box: the page never scrolls sideways on a phone.
    return (
        f'<div class="scroll" tabindex="0" role="region" aria-label="Figures per reviewer"><table>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def oversight_page(o: Oversight, since: str, *, reviewer: str, csrf: str) -> str:
    """The page: the period's form, the figures, the catch rate, then who approved what."""
    approvals = "".join(
        f'<li class="approved">{_e(_utc(e.at))} · <b>{_e(e.actor)}</b> · '
        f'<a href="/inbox/approvals/{_e(e.approval_id)}">{_e(e.approval_id)}</a> · {_e(e.detail)}</li>'
        for e in o.approvals
    )
    cut = '<p class="note">Older entries of this period are not read here: narrow the period.</p>' if o.cut else ""
    body = (
        f"<h1>Oversight since {_e(_utc(o.since))}</h1>"
        '<form method="get" action="/inbox/oversight" class="filters">'
        f'<label for="f-since">Period</label><input id="f-since" name="since" value="{_e(since)}">'
        '<button type="submit">Show</button></form>'
        f"<h2>Figures per reviewer</h2>{_figures(o.figures)}"
        f'<h2>Practice catch rate</h2><p class="catch">{_e(_rate(o.caught, o.caught + o.missed))}</p>'
        f"<h2>Who approved what</h2>{cut}"
        + (f"<ul class='history'>{approvals}</ul>" if approvals else "<p>Nobody approved anything in this period.</p>")
    )
    return layout("Oversight", body, reviewer=reviewer, csrf=csrf)
