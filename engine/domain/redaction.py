"""Evidence handling: redact personal data and bound the preview without splitting a character.

Redaction runs before anything is stored or shown, so raw evidence never reaches the store, the audit
log or Slack. Built-in patterns: e-mail addresses, phone numbers, payment card numbers (only digit
runs that pass the Luhn check, so order numbers survive). Extra patterns come from configuration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from hitl.engine.domain.display import graphemes_cut, reveal

__all__ = ["Redactor", "bounded", "luhn_valid", "reveal_hidden"]

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")
# 13-19 digits, optionally grouped by spaces or dashes.
_CARD = re.compile(r"(?<!\d)(?:\d[ \-]?){12,18}\d(?!\d)")
# International or national phone numbers: optional +, 9-15 digits with common separators.
_PHONE = re.compile(r"(?<![\w+])\+?\(?\d{1,4}\)?(?:[ .\-]?\(?\d{2,4}\)?){2,5}(?!\w)")


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
        text = _EMAIL.sub("[email]", text)
        text = _CARD.sub(_card_sub, text)
        text = _PHONE.sub(_phone_sub, text)
        for label, rx in self.extra:
            text = rx.sub(f"[{label}]", text)
        return text


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
