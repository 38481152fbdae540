"""Delegation: a reviewer hands their roles (or one of them) to another person for a while. Pure: no I/O.

The rules a delegation keeps, on every surface:

- it lasts at most :data:`MAX_DAYS` days, ends at ``until`` or when revoked, whichever comes first;
- it hands on only roles the delegator holds in their own right (from ``hitl.yaml``), never roles delegated to them:
  a delegation is never delegated again;
- a delegator has at most one delegation in force at a time (it names one role, or all of theirs); to hand roles to
  someone else they end it first;
- while it is in force the delegator and the delegate are one person to a decision: neither decides the other's
  request (separation of duties) and together they cast one vote toward a quorum. A decision cast through a
  delegated role names whom it acted for, so the vote stays theirs after the delegation ends.

A date is read in the reviewer's own time zone (their Slack profile's, or one named) and echoed back in UTC.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.delegation_bound import MAX_DAYS
from hitl.engine.domain.models import Reviewer

__all__ = [
    "MAX_DAYS",
    "Delegation",
    "acting_reviewer",
    "delegation_problem",
    "ended_text",
    "given_text",
    "parse_until",
    "utc_text",
    "zone",
]

_ID = r"^[^\x00-\x1f\x7f]+$"
_FIRST_SHOWN = datetime(1, 1, 2, tzinfo=UTC).timestamp()
_LAST_SHOWN = datetime(9999, 12, 30, tzinfo=UTC).timestamp()
"""The instants every surface can echo back (:func:`utc_text`), with a day to spare on either side: an end outside
them (``9999-12-31``, a year past 9999 in UTC, not a number) is refused, never a crash."""


class Delegation(BaseModel):
    """``delegator`` hands ``role`` (None: every role they hold in their own right) to ``delegate`` from ``given_at``
    until ``until``, or until it is ended (``ended_at``, by ``ended_by``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    delegator: str = Field(min_length=1, max_length=200, pattern=_ID)
    delegate: str = Field(min_length=1, max_length=200, pattern=_ID)
    role: str | None = Field(default=None, min_length=1, max_length=200, pattern=_ID)
    given_at: float
    until: float
    via: str = "api"
    """The surface it was given through: slack, cli, api."""
    ended_at: float | None = None
    ended_by: str | None = None
    """Who ended it; ``expiry`` when its time ran out."""

    def in_force(self, now: float) -> bool:
        """Whether it hands anything on at ``now``."""
        return self.ended_at is None and self.given_at <= now < self.until

    def covers(self, role: str) -> bool:
        """Whether it hands on ``role`` (when the delegator holds it)."""
        return self.role is None or self.role == role

    def ended(self, *, by: str, now: float) -> Delegation:
        """The same delegation, ended at ``now`` by ``by``."""
        return self.model_copy(update={"ended_at": now, "ended_by": by})


def delegation_problem(*, delegator: Reviewer, delegate: str, role: str | None, until: float, now: float) -> str | None:
    """Why ``delegator`` may not hand ``role`` (None: all of theirs) to ``delegate`` until ``until``; None when they
    may. ``delegator.roles`` must be the roles they hold in their own right (no delegated ones)."""
    if delegate == delegator.id:
        return "you cannot delegate to yourself; name another member of the workspace"
    if not delegator.roles:
        return f"{delegator.id} holds no reviewer role to delegate"
    if role is not None and role not in delegator.roles:
        held = ", ".join(sorted(delegator.roles))
        return f"{delegator.id} does not hold the role {role!r} (holds: {held}); name one of those or none for all"
    if not _FIRST_SHOWN <= until <= _LAST_SHOWN:
        return _beyond()
    if until <= now:
        return f"the end you gave ({utc_text(until)}) has passed; give a later date"
    if until - now > MAX_DAYS * 86400:
        latest = utc_text(now + MAX_DAYS * 86400)
        return f"a delegation lasts at most {MAX_DAYS} days (until {latest} at the latest); give an earlier date"
    return None


def acting_reviewer(
    reviewer: Reviewer,
    delegations: Iterable[Delegation],
    *,
    now: float,
    own_roles: Callable[[str], frozenset[str]],
) -> Reviewer:
    """``reviewer`` with what the delegations in force add: each role handed to them (and held by its delegator in
    their own right, ``own_roles``) as :attr:`Reviewer.delegated`, and everyone tied to them by a delegation, either
    way, as :attr:`Reviewer.linked`. ``reviewer.roles`` are their own roles, as configured."""
    delegated: dict[str, str] = {}
    linked: set[str] = set()
    for d in sorted(delegations, key=lambda d: (d.given_at, d.id)):
        if not d.in_force(now):
            continue
        if d.delegator == reviewer.id:
            linked.add(d.delegate)
        elif d.delegate == reviewer.id:
            linked.add(d.delegator)
            for role in sorted(own_roles(d.delegator)):
                if d.covers(role) and role not in reviewer.roles:
                    delegated.setdefault(role, d.delegator)
    if not delegated and not linked:
        return reviewer
    return reviewer.model_copy(
        update={
            "roles": reviewer.roles | frozenset(delegated),
            "delegated": tuple(sorted(delegated.items())),
            "linked": frozenset(linked),
        }
    )


_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{1,2}):(\d{2}))?$")


def zone(name: str | None) -> ZoneInfo:
    """The time zone ``name`` (an IANA name such as ``Europe/Paris``; None or empty: UTC); :class:`ValueError` with
    what to write for an unknown one."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; name one such as Europe/Paris or UTC") from None


def parse_until(text: str, tz: ZoneInfo) -> float:
    """The instant ``text`` names in ``tz``: ``YYYY-MM-DD`` means the end of that day (midnight after it),
    ``YYYY-MM-DD HH:MM`` that minute; an ISO 8601 time with an offset (``2026-12-24T17:00:00+01:00``) names its own.
    :class:`ValueError` saying what to write otherwise, and for an instant no date holds (``9999-12-31``'s end, a
    time past year 9999 or before year 1 in UTC), which no delegation could last until anyway."""
    m = _DATE.match(text.strip())
    if m is None:
        try:
            named = datetime.fromisoformat(text.strip())
        except ValueError:
            raise ValueError(
                f"{text.strip()[:40]!r} is not a date; write YYYY-MM-DD (to the end of that day) or YYYY-MM-DD HH:MM"
            ) from None
        at = (named if named.tzinfo is not None else named.replace(tzinfo=tz)).timestamp()
    else:
        year, month, day, hour, minute = m.groups()
        try:
            if hour is None:
                local = datetime(int(year), int(month), int(day), tzinfo=tz) + timedelta(days=1)
            else:
                local = datetime(int(year), int(month), int(day), int(hour), int(minute), tzinfo=tz)
        except ValueError:
            raise ValueError(f"{text.strip()[:40]!r} is not a date of the calendar; write YYYY-MM-DD") from None
        except OverflowError:  # the day after 9999-12-31
            raise ValueError(_beyond()) from None
        at = local.timestamp()
    if not _FIRST_SHOWN <= at <= _LAST_SHOWN:  # a local time whose UTC instant falls outside years 1-9999
        raise ValueError(_beyond())
    return at


def _beyond() -> str:
    return (
        f"that end is beyond what a date holds; a delegation lasts at most {MAX_DAYS} days from now: give a date "
        "within them"
    )


def utc_text(at: float) -> str:
    """``at`` as every surface echoes it: ``2026-12-24 23:00 UTC``."""
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _what(d: Delegation) -> str:
    return f"the role {d.role}" if d.role else "their roles"


def given_text(d: Delegation) -> str:
    """The audit's words for a delegation given (and what every surface echoes)."""
    return f"{d.delegator} delegated {_what(d)} to {d.delegate} until {utc_text(d.until)} ({d.id}, via {d.via})"


def ended_text(d: Delegation) -> str:
    """The audit's words for a delegation ended, revoked or run out."""
    how = "ran out" if d.ended_by == "expiry" else f"was ended by {d.ended_by}"
    return f"{d.delegator}'s delegation of {_what(d)} to {d.delegate} {how} ({d.id})"
