"""A tool's ``summary:``: the sentence a reviewer reads first ("Refund 120.00 to C-1042 for order 78291").

A sandboxed Jinja2 template over the call's exact arguments only (never the evidence), with filters for money,
dates and lists. The sentence carries the arguments' values, so it is as untrusted as they are: the card escapes it
like any argument. A template that fails on some arguments gives no sentence, never a refusal: the card then says
what it always said.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

__all__ = ["check_summary", "render_summary"]

_LIMIT = 200


def _money(value: Any, places: int = 2) -> str:
    """``1234.5`` -> ``1,234.50``."""
    return f"{float(value):,.{places}f}"


def _date(value: Any) -> str:
    """Epoch seconds or an ISO date (time) -> ``25 Nov 2026`` (UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        day: date = datetime.fromtimestamp(value, tz=UTC).date()
    else:
        day = datetime.fromisoformat(str(value)).date()
    return f"{day.day} {day:%b %Y}"


def _items(value: Any, limit: int = 5) -> str:
    """``["a", "b", "c"]`` -> ``a, b and c`` (at most ``limit`` named, then ``and N more``)."""
    names = [str(v) for v in (value if isinstance(value, list | tuple) else [value])]
    if len(names) > limit:
        return ", ".join(names[:limit]) + f" and {len(names) - limit} more"
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_ENV.filters.update({"money": _money, "date": _date, "list": _items})


def check_summary(template: str) -> str | None:
    """The template's syntax error, or None when it compiles."""
    try:
        _ENV.from_string(template)
    except TemplateError as exc:
        return str(exc)
    return None


def render_summary(template: str, args: Mapping[str, Any]) -> str | None:
    """The sentence for ``args`` (one line, at most 200 characters), or None when the template fails on them."""
    try:
        text = _ENV.from_string(template).render(args=dict(args))
    except (TemplateError, TypeError, ValueError, ArithmeticError):
        return None
    line = " ".join(text.split())
    return (line if len(line) <= _LIMIT else line[: _LIMIT - 1] + "…") or None
