"""A tool's consequence: what a call will do, computed by the tool's author before a person is asked, and shown to
that person as "What will happen". Pure: no I/O, no clock; running one is :mod:`hitl.engine.consequences`'s.

A consequence is a callable the tool's author wrote (``consequence: "module:function"`` in ``hitl.yaml``, or one
given beside the tool in Python), never the agent's: it receives a copy of the validated arguments and returns a
sentence, or a mapping with a ``summary`` sentence and optional parts: ``changes`` (a label to its ``before`` and
``after`` values), ``table`` (rows, each a mapping of column to value) and ``diff`` (text). :func:`shaped` checks
what it returned against the tool's :class:`ConsequenceLimits`; anything else is a failed consequence naming what
was returned. What it returned is untrusted text like the arguments: redacted before it is stored, and every
surface draws it with the fidelity rules of arguments (:func:`~hitl.engine.domain.display.show`), escaped.

:meth:`Consequence.digest` is the SHA-256 of its RFC 8785 canonical JSON: the view a person decided on carries it,
so a decision's recorded view names exactly which consequence was shown (and a later check can compare it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Annotated, Any

import rfc8785
from pydantic import BaseModel, ConfigDict, Field, field_validator

from hitl.engine.domain.display import lookalikes, reveal, show
from hitl.engine.domain.durations import Seconds

__all__ = [
    "NO_CONSEQUENCE",
    "WHAT_WILL_HAPPEN",
    "Consequence",
    "ConsequenceChange",
    "ConsequenceLimits",
    "ConsequenceOutcome",
    "not_computed",
    "shaped",
]

WHAT_WILL_HAPPEN = "What will happen"
"""The label every surface puts above a consequence (hitl's words; what follows is the tool author's output)."""
NO_CONSEQUENCE = "No consequence"
"""The start of the line shown when a consequence was not computed ("No consequence (timed out after 2 s)")."""
_PARTS = ("summary", "changes", "table", "diff")


class ConsequenceOutcome(StrEnum):
    """How computing a consequence ended (audited, and stored with the approval)."""

    SHOWN = "shown"
    """It returned a consequence within its bounds: reviewers see it."""
    BUSY = "busy"
    """Every worker of the tool was busy: the approval was asked at once without it."""
    TIMED_OUT = "timed_out"
    """It ran past its time bound: the approval was asked at the bound without it (its worker killed)."""
    FAILED = "failed"
    """It raised, or returned something that is not a consequence, or more than its bounds."""


class ConsequenceLimits(BaseModel):
    """How far one tool's consequence may go (``consequence_limits:`` of a tool in ``hitl.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Seconds = Field(default=2.0, gt=0, le=60)
    """How long it may run before the approval is asked without it (``2s``)."""
    max_bytes: int = Field(default=4096, ge=64, le=65536)
    """The most bytes its result may take as JSON (UTF-8): more is a failed consequence."""
    max_rows: int = Field(default=50, ge=1, le=500)
    """The most table rows shown; more are cut and counted."""
    workers: int = Field(default=4, ge=1, le=64)
    """How many of the tool's consequences may run at once; one more is ``busy`` at once."""
    env: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")], ...] = Field(default=(), max_length=20)
    """Environment variables a ``hitl serve`` worker passes on to it beside ``PATH``, ``HOME`` and ``LANG`` (never
    one of hitl's ``HITL_`` or Slack's ``SLACK_``: those hold keys and tokens)."""

    @field_validator("env")
    @classmethod
    def _not_secrets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        held = [n for n in v if n.upper().startswith(("HITL_", "SLACK_"))]
        if held:
            raise ValueError(f"{held[0]} cannot be passed to a consequence: HITL_ and SLACK_ variables hold keys")
        return v


class ConsequenceChange(BaseModel):
    """One value a call changes: its label, and the value before and after (any JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    before: Any = None
    after: Any = None


class Consequence(BaseModel):
    """What a call will do, as its tool's consequence computed it (or why it was not computed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: ConsequenceOutcome
    summary: str = ""
    """A sentence: what happens (empty when not computed)."""
    changes: tuple[ConsequenceChange, ...] = ()
    table: tuple[dict[str, Any], ...] = ()
    rows_cut: int = 0
    """Rows the table had beyond ``max_rows`` (not shown, counted)."""
    diff: str = ""
    why: str = ""
    """Why it was not computed, in a reviewer's words ("timed out after 2 s", "failed: returned int")."""

    @property
    def shown(self) -> bool:
        """Whether there is a consequence to show (else only the line saying why not)."""
        return self.outcome is ConsequenceOutcome.SHOWN

    @property
    def headline(self) -> str:
        """One line: its summary, or "No consequence (why)" (a Home line, a list)."""
        return self.summary if self.shown else f"{NO_CONSEQUENCE} ({self.why or self.outcome})"

    def canonical(self) -> dict[str, Any]:
        """The consequence as plain JSON data (what its digest is of)."""
        return self.model_dump(mode="json")

    def digest(self) -> str:
        """SHA-256 (hex) of its RFC 8785 canonical JSON."""
        return hashlib.sha256(rfc8785.dumps(self.canonical())).hexdigest()

    def lines(self) -> list[tuple[str, tuple[str, ...]]]:
        """The consequence as lines of plain text a surface shows as they are (never markup), each with what
        could fool the eye in it: the summary with its hidden characters marked, each change ``label: before →
        after`` and each table row ``column: value · ...`` with values drawn as arguments are
        (:func:`~hitl.engine.domain.display.show`), then the diff's lines, hidden characters marked."""
        if not self.shown:
            return [(self.headline, ())]
        out = [_text(self.summary)]
        for c in self.changes:
            before, after = show(c.before), show(c.after)
            label = _text(c.label)
            line = f"{label[0]}: {before.text} → {after.text}"
            out.append((line, (*label[1], *before.warnings, *after.warnings)))
        for row in self.table:
            cells = [(_text(str(k)), show(v)) for k, v in row.items()]
            line = " · ".join(f"{k[0]}: {v.text}" for k, v in cells)
            out.append((line, tuple(w for k, v in cells for w in (*k[1], *v.warnings))))
        if self.rows_cut:
            out.append((f"… and {self.rows_cut} more rows", ()))
        out += [_text(line) for line in self.diff.splitlines()]
        return out


def _text(text: str) -> tuple[str, tuple[str, ...]]:
    revealed, hidden = reveal(text)
    marks = tuple(lookalikes(text)) + ((f"{hidden} hidden characters marked",) if hidden else ())
    return revealed, marks


def not_computed(outcome: ConsequenceOutcome, why: str) -> Consequence:
    """A consequence that was not computed (busy, timed out, failed), saying why."""
    return Consequence(outcome=outcome, why=why[:300])


def shaped(returned: object, limits: ConsequenceLimits, *, redact: Callable[[str], str] = str) -> Consequence:
    """What a consequence callable returned, as a :class:`Consequence` within ``limits`` (every string through
    ``redact``); a failed one naming what was wrong when it is not a sentence or a mapping of the known parts."""
    try:
        return _shaped(returned, limits, redact)
    except _Refused as exc:
        return not_computed(ConsequenceOutcome.FAILED, f"failed: {exc}")
    except RecursionError:  # lists in lists a thousand deep: no reviewer reads that either
        return not_computed(ConsequenceOutcome.FAILED, "failed: returned values nested too deep")


class _Refused(Exception):
    """What a consequence returned is not one (the message says why, after "failed: ")."""


def _shaped(returned: object, limits: ConsequenceLimits, redact: Callable[[str], str]) -> Consequence:
    if isinstance(returned, str):
        returned = {"summary": returned}
    if not isinstance(returned, Mapping):
        raise _Refused(f"returned {type(returned).__name__}, not a str or a mapping with a summary")
    unknown = [str(k) for k in returned if k not in _PARTS]
    if unknown:
        raise _Refused(f"returned an unknown part {unknown[0][:40]!r} (the parts are {', '.join(_PARTS)})")
    summary, diff = returned.get("summary"), returned.get("diff", "")
    if not isinstance(summary, str) or not summary.strip():
        raise _Refused("returned no summary sentence (a non-empty str)")
    if not isinstance(diff, str):
        raise _Refused(f"returned a diff of {type(diff).__name__}, not a str")
    rows = _rows(returned.get("table", ()))
    cut = max(len(rows) - limits.max_rows, 0)
    try:
        size = len(json.dumps({**returned, "table": rows[: limits.max_rows]}, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        raise _Refused(f"returned a value that is not JSON ({exc})") from None
    if size > limits.max_bytes:
        raise _Refused(f"returned {size} bytes, more than its bound of {limits.max_bytes}")
    clean: Callable[[Any], Any] = lambda v: _redacted(v, redact)  # noqa: E731
    consequence = Consequence(
        outcome=ConsequenceOutcome.SHOWN,
        summary=redact(summary),
        changes=tuple(
            ConsequenceChange(label=redact(label), before=clean(b), after=clean(a))
            for label, (b, a) in _changes(returned.get("changes", {})).items()
        ),
        table=tuple({redact(str(k)): clean(v) for k, v in row.items()} for row in rows[: limits.max_rows]),
        rows_cut=cut,
        diff=redact(diff),
    )
    try:
        consequence.digest()
    except rfc8785.CanonicalizationError as exc:
        raise _Refused(f"returned a value RFC 8785 cannot encode ({exc})") from None
    return consequence


def _rows(table: object) -> list[Mapping[str, Any]]:
    if not isinstance(table, list | tuple) or not all(isinstance(r, Mapping) for r in table):
        raise _Refused(f"returned a table of {type(table).__name__}, not a list of rows (mappings)")
    return list(table)


def _changes(changes: object) -> dict[str, tuple[Any, Any]]:
    if not isinstance(changes, Mapping):
        raise _Refused(f"returned changes of {type(changes).__name__}, not a mapping of label to before/after")
    out: dict[str, tuple[Any, Any]] = {}
    for label, change in changes.items():
        if isinstance(change, Mapping) and set(change) == {"before", "after"}:
            out[str(label)] = (change["before"], change["after"])
        elif isinstance(change, list | tuple) and len(change) == 2:
            out[str(label)] = (change[0], change[1])
        else:
            raise _Refused(f"returned a change {str(label)[:40]!r} that is not {{before, after}}")
    return out


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): _redacted(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, redact) for v in value]
    return value
