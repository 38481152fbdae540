"""A tool's ``summary:``: the sentence a reviewer reads first ("Refund EUR 120.00 to “C-1042” for order “78291”").

A sandboxed Jinja2 template over the call's exact arguments only (never the evidence), with filters for money,
dates and lists. The sentence carries the arguments' values, so no value may pass for part of the sentence: every
value it shows is delimited as its type is (a string in “quotes”, numbers bare), cut at its first line break (with
``…``), its hidden characters marked; money is exact (never rounded) and shows its currency, from
``money(currency="EUR")`` or the declared schema's ``x-currency``. The card escapes the sentence like any
argument. A template that fails on some arguments gives no sentence, never a refusal: the card then says what it
always said.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from hitl.engine.domain.display import graphemes_cut, money, reveal

__all__ = ["check_summary", "currencies", "render_summary"]

_LIMIT = 200


class _Shown(str):
    """A filter's text: already shows each value it holds as it should (the sentence delimits nothing again)."""

    __slots__ = ()


class _IntAmount(int):
    """An integer argument the declared schema gives a currency (``x-currency``)."""

    currency = ""


class _FloatAmount(float):
    """A number argument the declared schema gives a currency (``x-currency``)."""

    currency = ""


def _amount(value: Any, currency: str) -> Any:
    """``value`` carrying its currency, for :func:`_money` (anything but a number is left as it is)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    made: _IntAmount | _FloatAmount = _IntAmount(value) if isinstance(value, int) else _FloatAmount(value)
    made.currency = currency
    return made


def _delimited(value: Any) -> str:
    """One value as the sentence shows it: a string “quoted”, cut at its first line break, hidden characters
    marked; ``true``, ``false`` and ``null`` as JSON writes them; a number as it is."""
    if isinstance(value, _Shown):
        return str(value)
    if isinstance(value, _IntAmount | _FloatAmount):
        return money(value, value.currency or None)
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    first, broke, _ = text.partition("\n")
    shown, _ = reveal(first)
    return f"“{shown}{'…' if broke else ''}”"


def _money(value: Any, places: int = 2, currency: str | None = None) -> _Shown:
    """``1234.5`` -> ``1,234.50``; with a currency (given, or the argument's ``x-currency``) ``EUR 1,234.50``.
    Exact: ``899.999`` stays ``899.999``."""
    return _Shown(money(value, currency or getattr(value, "currency", None) or None, places))


def _date(value: Any) -> _Shown:
    """Epoch seconds or an ISO date (time) -> ``25 Nov 2026`` (UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        day: date = datetime.fromtimestamp(value, tz=UTC).date()
    else:
        day = datetime.fromisoformat(str(value)).date()
    return _Shown(f"{day.day} {day:%b %Y}")


def _items(value: Any, limit: int = 5) -> _Shown:
    """``["a", "b", "c"]`` -> ``“a”, “b” and “c”`` (at most ``limit`` named, then ``and N more``)."""
    names = [_delimited(v) for v in (value if isinstance(value, list | tuple) else [value])]
    if len(names) > limit:
        return _Shown(", ".join(names[:limit]) + f" and {len(names) - limit} more")
    if len(names) <= 1:
        return _Shown("".join(names))
    return _Shown(", ".join(names[:-1]) + " and " + names[-1])


# ``finalize`` sees every ``{{ ... }}`` result: each value is delimited there, so none reads as the sentence's own.
_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, finalize=_delimited)
_ENV.filters.update({"money": _money, "date": _date, "list": _items})


def currencies(schema: Mapping[str, Any] | None) -> dict[str, str]:
    """Each top-level argument's currency, as a declared schema gives it (``x-currency: EUR``)."""
    props = (schema or {}).get("properties")
    if not isinstance(props, dict):
        return {}
    return {
        name: spec["x-currency"]
        for name, spec in props.items()
        if isinstance(spec, dict) and isinstance(spec.get("x-currency"), str) and spec["x-currency"].strip()
    }


def check_summary(template: str) -> str | None:
    """The template's syntax error, or None when it compiles."""
    try:
        _ENV.from_string(template)
    except TemplateError as exc:
        return str(exc)
    return None


def render_summary(
    template: str, args: Mapping[str, Any], *, currencies: Mapping[str, str] | None = None
) -> str | None:
    """The sentence for ``args`` (one line, at most 200 characters), or None when the template fails on them.
    ``currencies``: each top-level argument's currency, from the declared schema's ``x-currency``."""
    known = currencies or {}
    values = {k: _amount(v, known[k]) if k in known else v for k, v in args.items()}
    try:
        text = _ENV.from_string(template).render(args=values)
    except (TemplateError, TypeError, ValueError, ArithmeticError):
        return None
    line = " ".join(text.split())
    return (line if len(line) <= _LIMIT else graphemes_cut(line, _LIMIT - 1) + "…") or None
