"""Evidence handling: redact personal data and bound the preview without splitting a character.

Redaction runs before anything is stored or shown, so raw evidence never reaches the store, the audit
log or Slack. Built-in patterns: e-mail addresses, phone numbers, payment card numbers (only digit
runs that pass the Luhn check, so order numbers survive). Extra patterns come from configuration.

Every built-in pattern reads a text in time linear in its length. Evidence is cut to its limit before any
pattern reads it (:meth:`Redactor.redact_bounded`), so an operator's pattern never reads more than that either.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from hitl.engine.domain.display import graphemes_cut, reveal

__all__ = ["Redactor", "bounded", "luhn_valid", "reveal_hidden"]

# A run of the characters a local part is made of, and the rest of an address when one follows the run. The run is
# read whole (possessive, and a match of it alone is kept as it is), so the engine never starts again inside a run it
# has read: linear. A pattern that may start an address anywhere reads a long run again from each of its positions,
# quadratic in a text without an `@` (40,000 characters: 3.5 s).
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]++(@[A-Za-z0-9.\-]+\.[A-Za-z]{2,})?")
# 13-19 digits, optionally grouped by spaces or dashes.
_CARD = re.compile(r"(?<!\d)(?:\d[ \-]?){12,18}\d(?!\d)")
# International or national phone numbers: optional +, 9-15 digits with common separators.
_PHONE = re.compile(r"(?<![\w+])\+?\(?\d{1,4}\)?(?:[ .\-]?\(?\d{2,4}\)?){2,5}(?!\w)")
_EDGE = 256
"""Characters either side of a cut that are searched for something a pattern would mask running across it."""

_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def luhn_valid(digits: str) -> bool:
    """True when ``digits`` (only 0-9) passes the Luhn checksum."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


@dataclass(frozen=True)
class Redactor:
    """Replaces sensitive substrings with labelled placeholders."""

    extra: tuple[tuple[str, re.Pattern[str]], ...] = field(default=())

    @classmethod
    def with_patterns(cls, patterns: Iterable[tuple[str, str]]) -> Redactor:
        """Build a redactor with extra ``(label, regex)`` patterns from configuration."""
        return cls(extra=tuple((label, re.compile(rx)) for label, rx in patterns))

    def redact(self, text: str) -> str:
        """``text`` with every match of the patterns replaced by its placeholder (``[email]``, ``[label]``), in
        time linear in its length for the built-in patterns; an operator's pattern costs what it costs, so untrusted
        text of any length goes through :meth:`redact_bounded`."""
        for rx, replace in self._rules():
            text = rx.sub(replace, text)
        return text

    def redact_bounded(self, text: str, limit: int, *, marker: str = "…") -> str:
        """At most ``limit`` characters of ``text``, redacted, as :func:`bounded` cuts them (``marker`` when cut).

        The text is cut before any pattern reads it: what the patterns read is bounded by ``limit`` however long
        ``text`` is (an in-process ``ask`` has no request size limit). What a pattern would mask running across the
        cut is left out whole rather than shown in part (searched for within 256 characters of the cut).
        """
        if limit <= 0 or len(text) <= limit:
            return bounded(self.redact(text[: max(limit, 0)]), limit, marker=marker)
        room = max(limit - len(marker), 0)
        kept = graphemes_cut(text, room)
        kept = graphemes_cut(kept, self._whole_before(text, len(kept)))
        return graphemes_cut(self.redact(kept), room) + marker

    def _rules(self) -> Iterator[_Rule]:
        yield _EMAIL, _email_sub
        yield _CARD, _card_sub
        yield _PHONE, _phone_sub
        for label, rx in self.extra:
            yield rx, _placeholder(f"[{label}]")

    def _whole_before(self, text: str, cut: int) -> int:
        """Where ``text`` cut at ``cut`` must end so that no masked match runs across the cut: the start of the first
        one near it that does, else ``cut``."""
        lo = max(cut - _EDGE, 0)
        near = text[lo : cut + _EDGE]
        across = (
            lo + m.start()
            for rx, replace in self._rules()
            for m in rx.finditer(near)
            if m.start() < cut - lo < m.end() and replace(m) != m.group(0)
        )
        return min(across, default=cut)


def _placeholder(text: str) -> Callable[[re.Match[str]], str]:
    return lambda _: text


def _email_sub(m: re.Match[str]) -> str:
    return "[email]" if m.group(1) else m.group(0)


def _card_sub(m: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", m.group(0))
    if 13 <= len(digits) <= 19 and luhn_valid(digits):
        return "[card]"
    return m.group(0)


def _phone_sub(m: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", m.group(0))
    # A bare short number (an order id, an amount) is not a phone number.
    has_sep = bool(re.search(r"[ .\-()+]", m.group(0).strip()))
    if 9 <= len(digits) <= 15 and has_sep:
        return "[phone]"
    return m.group(0)


def bounded(text: str, limit: int, *, marker: str = "…") -> str:
    """At most ``limit`` characters, cut at a grapheme boundary (:func:`~hitl.engine.domain.display.graphemes_cut`,
    Unicode's own rules), with ``marker`` when cut: never half of a surrogate pair, a combining sequence, a ZWJ
    emoji sequence or a flag."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return graphemes_cut(text, max(limit - len(marker), 0)) + marker


def reveal_hidden(text: str) -> str:
    """Every control, invisible or direction-changing character shown as ``[U+XXXX]`` where it was (line breaks
    and tabs kept), so untrusted text reads the same to a reviewer as it does to a machine (see
    :func:`hitl.engine.domain.display.reveal`)."""
    return reveal(text, keep="\n\t")[0]
