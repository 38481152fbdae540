"""What a person is shown of a value, faithfully: its type, every character, its full length, and what could fool
the eye. Pure: no I/O. Every surface that shows an action's arguments (the Slack card and its full-value view,
``/hitl show``, the CLI) reads them through here.

- **Types stay visible.** A string is delimited (``"false"``, ``"1000"``, ``"(none)"``); a boolean, a number and
  null are not (``false``, ``1000``, ``null``). Nothing is rounded: a number shows as JSON writes it.
- **Nothing is dropped silently.** A control, invisible or direction-changing character (Unicode's
  Default_Ignorable_Code_Point and Bidi_Control, and every C0/C1 control) shows as ``[U+XXXX]`` where it was; a line
  break in a string shows as ``↵`` at the end of its line.
- **Look-alikes are marked, without crying wolf** (Unicode UTS #39). Each whitespace-separated token, and an
  identifier-like value (an email, a hostname, a URL: anything without spaces) as a whole, is checked for *mixed
  scripts*: the intersection of its characters' Script_Extensions, Common and Inherited ignored, with the standard
  mixes allowed (Han with Hiragana and Katakana, with Bopomofo, with Hangul). An identifier-like value in one
  script other than Latin whose confusable skeleton is plain ASCII is a *whole-script confusable* (an all-Cyrillic
  ``аррӏе``). Prose in any one script per word ("Москва (Moscow)", a Japanese memo) is not flagged.
- **Text that reads as another type is marked**: a string ``"false"``, ``"null"`` or ``"1000"`` differs from
  ``false``, ``null`` or ``1000`` only by its quotes, so it carries a warning too.
- **Every mark has a short name** (:attr:`Shown.marks`: "look-alike letters", "hidden characters", "text that
  reads as a number"), so a line too short for the warning (a headline, a queue's line) still carries it.
- **Long values are cut only at a grapheme boundary** (:func:`excerpt`), and say how long they are in one number:
  the value's own characters (code points), without the quotes.

The Unicode data is ICU's, pinned (:data:`UNICODE_VERSION`), so a warning does not change with an unseen upgrade.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from functools import cache
from typing import Any

from hitl.engine.domain.frozen import quick_init

__all__ = [
    "UNICODE_VERSION",
    "Shown",
    "ValueKind",
    "excerpt",
    "graphemes_cut",
    "lookalikes",
    "money",
    "pages",
    "reads_as",
    "reveal",
    "show",
]

UNICODE_VERSION = "16.0"
"""The Unicode version of the pinned ICU (77.1) every warning is computed with."""

_LINE_BREAK = "↵"
"""Shown at the end of a line a string's line break ends (the break itself is kept, inside the value's box)."""


class ValueKind(StrEnum):
    """A value's JSON type, as a reviewer reads it."""

    STRING = "text"
    NUMBER = "number"
    BOOLEAN = "true/false"
    NULL = "empty (null)"
    ARRAY = "list"
    OBJECT = "object"


@quick_init
@dataclass(frozen=True)
class Shown:
    """A value as a person is shown it: ``text`` in full (a string delimited, hidden characters marked),
    ``length`` the characters the value itself holds (a string's, else its JSON's), and ``warnings``: what could
    fool the eye, in a reviewer's words."""

    kind: ValueKind
    text: str
    length: int
    warnings: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()
    """Each kind of warning in a few words ("look-alike letters"), for lines with no room for the warning."""


def show(value: Any, *, declared: Mapping[str, Any] | None = None) -> Shown:
    """``value`` (plain JSON data, as an action's arguments are after normalising) as a person is shown it.
    ``declared``: the argument's schema in ``hitl.yaml``, when it has one; a string it declares as ``type: string``
    (an order number ``"78291"``) is text by contract, so it is not marked as reading as another type: a mark on
    every such value would teach reviewers to ignore the mark."""
    if value is None:
        return Shown(ValueKind.NULL, "null", 4)
    if isinstance(value, bool):
        text = "true" if value else "false"
        return Shown(ValueKind.BOOLEAN, text, len(text))
    if isinstance(value, int | float):
        text = json.dumps(value)  # exact: an int as its digits, a float as its shortest round-trip form
        return Shown(ValueKind.NUMBER, text, len(text))
    if isinstance(value, str):
        revealed, hidden = reveal(value, keep="\n")
        breaks = value.count("\n")
        text = '"' + revealed.replace("\n", f"{_LINE_BREAK}\n") + '"'
        alike = lookalikes(value)
        other = None if (declared or {}).get("type") == "string" else reads_as(value)
        warnings = [*alike, *_hidden_warning(hidden)]
        if other is not None:  # the value in the warning is digits, signs and a word only: inert, and bounded
            bare = value.strip()
            bare = bare if len(bare) <= 40 else bare[:40] + "…"
            warnings.append(f"text, not {_ARTICLE[other]}: only its quotes tell it from {bare}")
        if breaks:
            warnings.append(f"{breaks} line break{'s' if breaks != 1 else ''} inside the text (shown as {_LINE_BREAK})")
        marks = _marks(alike=bool(alike), hidden=hidden, other=other)
        return Shown(ValueKind.STRING, text, len(value), tuple(warnings), marks)
    encoded = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=False)
    revealed, hidden = reveal(encoded, keep="\n")
    warnings = [f"{where}: {w}" for where, text in _strings(value, "") for w in lookalikes(text)]
    marks = _marks(alike=bool(warnings), hidden=hidden, other=None)
    warnings += _hidden_warning(hidden)
    kind = ValueKind.ARRAY if isinstance(value, list | tuple) else ValueKind.OBJECT
    return Shown(kind, revealed, len(encoded), tuple(warnings), marks)


_ARTICLE = {"number": "a number", "true/false value": "a true/false value", "null": "null"}
_NUMBER_LIKE = re.compile(r"[+-]?(?:\d[\d,_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_WORDS = {"true": "true/false value", "false": "true/false value", "null": "null", "none": "null", "nan": "number"}


def reads_as(text: str) -> str | None:
    """The type a string reads as though it is text (``"1000"``: "number", ``"false"``: "true/false value",
    ``"null"``: "null"), or None for text that reads as text."""
    bare = text.strip()
    if _NUMBER_LIKE.fullmatch(bare) or bare.lower() in ("infinity", "-infinity", "+infinity"):
        return "number"
    return _WORDS.get(bare.lower())


def _marks(*, alike: bool, hidden: int, other: str | None) -> tuple[str, ...]:
    """The short names of what could fool the eye (line breaks show as ↵ wherever the value is drawn: no mark)."""
    found = ["look-alike letters"] if alike else []
    if hidden:
        found.append("hidden characters")
    if other is not None:
        found.append(f"text that reads as {_ARTICLE[other]}")
    return tuple(found)


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string in a nested value (keys included), with where it is."""
    found: list[tuple[str, str]] = []
    if isinstance(value, str):
        found.append((path or "value", value))
    elif isinstance(value, dict):
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            found.append((f"key {where}", str(k)))
            found += _strings(v, where)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found += _strings(v, f"{path}[{i}]")
    return found


def _hidden_warning(count: int) -> list[str]:
    if not count:
        return []
    plural = "s" if count != 1 else ""
    return [f"{count} invisible, control or direction-changing character{plural}, shown as [U+XXXX] where it was"]


@cache
def _icu() -> Any:
    """ICU, imported on first use: importing hitl (an agent process, a Temporal workflow's sandbox, which cannot
    import a C extension twice) loads none of it until a value is shown."""
    import icu

    return icu


# -- hidden characters ---------------------------------------------------------------------------------------
@cache
def _hidden_class() -> re.Pattern[str]:
    """Unicode's default-ignorable and bidi-control characters and every control, from the pinned ICU, the
    Braille blank (a letter to Unicode, drawn as nothing), the line and paragraph separators (a break that a
    terminal, a log line or a reader splitting at newlines does not see as one), and the surrogates (a lone one,
    which only an in-process str holds, would otherwise break the JSON or UTF-8 that carries the text on)."""
    found = _icu().UnicodeSet(r"[[:Default_Ignorable_Code_Point:][:Bidi_Control:][:Cc:][\u2800\u2028\u2029]]")
    ranges = "".join(
        re.escape(chr(start)) if start == end else f"{re.escape(chr(start))}-{re.escape(chr(end))}"
        for start, end in ((ord(a), ord(b)) for a, b in found.ranges())
    )
    return re.compile(f"[{ranges}\\ud800-\\udfff]")  # the surrogates by hand: PyICU hands each back as U+FFFD


def reveal(text: str, *, keep: str = "") -> tuple[str, int]:
    """``text`` with every hidden character (but those in ``keep``, such as a line break, and those that join
    what they sit between as writing needs them: :func:`_in_use`) shown as ``[U+XXXX]`` where it was, and how many
    were marked."""
    count = 0

    def mark(m: re.Match[str]) -> str:
        nonlocal count
        ch = m.group(0)
        if ch in keep or _in_use(text, m.start()):
            return ch
        count += 1
        return f"[U+{ord(ch):04X}]"

    return _hidden_class().sub(mark, text), count


_JOINERS = frozenset("\u200c\u200d")
_KEYCAP_BASES = frozenset("0123456789#*")


def _in_use(text: str, i: int) -> bool:
    """Whether the default-ignorable character at ``i`` does what writing uses it for, so marking it would cry
    wolf: a zero-width (non-)joiner between two characters that are not ASCII (an emoji sequence, Persian, an
    Indic conjunct), a variation selector after a character that is not ASCII or a keycap's digit, or a tag
    character inside an emoji tag sequence (a subdivision flag). Bidi controls and C0/C1 controls never are."""
    ch = text[i]
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if ch in _JOINERS:
        return _written(before) and _written(after)
    if "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef":
        return _written(before) or before in _KEYCAP_BASES
    if "\U000e0020" <= ch <= "\U000e007f":
        j = i
        while j > 0 and "\U000e0020" <= text[j - 1] <= "\U000e007e":
            j -= 1
        return j > 0 and text[j - 1] == "\U0001f3f4"
    return False


@cache  # a few distinct characters, asked about once for each joiner around them (32,000 in a long emoji chain)
def _written(ch: str) -> bool:
    """A character that is not ASCII, and is neither a space nor hidden itself."""
    return bool(ch) and not ch.isascii() and not ch.isspace() and not _hidden_class().match(ch)


# -- look-alikes (UTS #39) -------------------------------------------------------------------------------------
def _code(name: str) -> int:
    return int(_icu().Script.getCode(name)[0])


@cache
def _scripts() -> tuple[frozenset[int], dict[int, frozenset[int]], int]:
    """(Common and Inherited, the augmented script sets of UTS #39 section 5.1, Latin)."""
    han, hanb, jpan, kore = _code("Hani"), _code("Hanb"), _code("Jpan"), _code("Kore")
    augment = {
        han: frozenset({han, hanb, jpan, kore}),
        _code("Hira"): frozenset({_code("Hira"), jpan}),
        _code("Kana"): frozenset({_code("Kana"), jpan}),
        _code("Hang"): frozenset({_code("Hang"), kore}),
        _code("Bopo"): frozenset({_code("Bopo"), hanb}),
    }
    return frozenset({_code("Zyyy"), _code("Zinh")}), augment, _code("Latn")


@cache
def _extensions(ch: str) -> frozenset[int]:
    ignored, augment, _ = _scripts()
    out: set[int] = set()
    for script in _icu().Script.getScriptExtensions(ord(ch)):
        if script not in ignored:
            out |= augment.get(script, {script})
    return frozenset(out)


def _resolved(token: str) -> frozenset[int] | None:
    """The token's resolved script set (None: only Common and Inherited characters, which fit any script)."""
    result: frozenset[int] | None = None
    for ch in token:
        scripts = _extensions(ch)
        if scripts:
            result = scripts if result is None else result & scripts
    return result


@cache
def _checker() -> Any:
    return _icu().SpoofChecker()


def _reads_like(text: str) -> str:
    """``text`` with each character that is not ASCII replaced by its ASCII look-alike where UTS #39's confusables
    give one (``pаypal.com`` -> ``paypal.com``); ASCII characters stay as they are (the full skeleton would also
    fold ``m`` into ``rn``, which is for comparing, not for showing)."""
    return "".join(c if c.isascii() else _confusable(c) for c in text)


@cache
def _confusable(ch: str) -> str:
    skeleton = str(_checker().getSkeleton(0, ch))
    return skeleton if skeleton.isascii() else ch


def _script_name(ch: str) -> str:
    return str(_icu().Script.getScript(ord(ch)).getName()).replace("_", " ")


_IDENTIFIER_LIKE = re.compile(r"\S+")


def lookalikes(text: str) -> list[str]:
    """What in ``text`` could pass for something else: a token mixing scripts (with the characters that differ and
    what it reads like), or an identifier-like value in one script that reads like Latin. Empty for ordinary text."""
    found: list[str] = []
    identifier = bool(_IDENTIFIER_LIKE.fullmatch(text))
    for token in dict.fromkeys([text] if identifier else text.split()):  # each distinct token once
        if token.isascii():
            continue
        resolved = _resolved(token)
        if resolved is not None and not resolved:
            found.append(_mixed(token))
        elif identifier and resolved and _scripts()[2] not in resolved:
            skeleton = _reads_like(token)
            if skeleton.isascii() and any(c.isalpha() for c in skeleton):
                script = next((_script_name(c) for c in token if _extensions(c)), "another script")
                found.append(f"all {script}, but reads like the Latin {_quoted(skeleton)}: look-alike letters")
    return found[:5]


def _mixed(token: str) -> str:
    """Which scripts a token mixes, which characters are the odd ones, and what it reads like."""
    by_script: dict[str, list[tuple[int, str]]] = {}
    for i, ch in enumerate(token):
        if _extensions(ch):
            by_script.setdefault(_script_name(ch), []).append((i, ch))
    # The odd characters: those not in Latin when Latin is one of the scripts (a Latin-looking name with a few
    # foreign letters is the attack), else those of the scripts with fewer characters.
    ordered = sorted(by_script.items(), key=lambda kv: (kv[0] != "Latin", -len(kv[1])))
    names = " and ".join(name for name, _ in ordered[:3])
    odd = [(i, ch, name) for name, chars in ordered[1:] for i, ch in chars][:3]
    where = ", ".join(f"{_glyph(ch)} (U+{ord(ch):04X}, {name}) at character {i + 1}" for i, ch, name in odd)
    skeleton = _reads_like(token)
    reads = f"; reads like {_quoted(skeleton)}" if skeleton.isascii() else ""
    return f"{_quoted(token)} mixes {names}: {where}{reads}"


def _glyph(ch: str) -> str:
    """A character as a warning names it: itself, unless it draws as nothing."""
    return "an invisible character" if _hidden_class().match(ch) else ch


def _quoted(text: str) -> str:
    shown, _ = reveal(text[:80])
    return f"“{shown}{'…' if len(text) > 80 else ''}”"


# -- cutting and paging --------------------------------------------------------------------------------------
def _boundaries(text: str) -> list[int]:
    """Every grapheme boundary of ``text`` as a code-point offset (ICU counts UTF-16 units)."""
    it = _icu().BreakIterator.createCharacterInstance(_icu().Locale.getRoot())
    it.setText(text)
    units = [0, *it]
    if all(ord(c) < 0x10000 for c in text):
        return units
    to_point, unit = {}, 0
    for i, ch in enumerate(text):
        to_point[unit] = i
        unit += 2 if ord(ch) >= 0x10000 else 1
    to_point[unit] = len(text)
    return [to_point[u] for u in units]


_STREAM_SAFE = 32
"""The most code points a grapheme holds in any text written to be read (Unicode's Stream-Safe Text Format, UAX #15,
allows 30 combining marks in a row); a longer one is built to hide or to overflow (zalgo, a chain of 1,000 ZWJs)."""


def graphemes_cut(text: str, limit: int) -> str:
    """The longest start of ``text`` within ``limit`` characters that ends at a grapheme boundary; a grapheme longer
    than :data:`_STREAM_SAFE` that straddles the limit is cut inside it, so its start still shows (a reason that is
    one 4,000-code-point grapheme would otherwise show as nothing at all)."""
    if len(text) <= limit:
        return text
    head = text[: limit + 16]  # enough for any grapheme that straddles the limit
    cut = max((b for b in _boundaries(head) if b <= limit), default=0)
    return text[:limit] if limit - cut > _STREAM_SAFE else text[:cut]


def excerpt(value: Any, limit: int) -> tuple[str, int]:
    """The start of ``value`` as shown (:func:`show`'s text) within ``limit`` characters, cut at a grapheme
    boundary, and how many of the value's own characters it shows, counted as :attr:`Shown.length` counts them (a
    string's code points without its quotes; else its JSON's): the one number a cut value says of itself."""
    shown = show(value)
    if len(shown.text) <= limit:
        return shown.text, shown.length
    string = isinstance(value, str)
    source = value if string else json.dumps(value, ensure_ascii=False, indent=1, sort_keys=False)
    keep = limit - 1 if string else limit
    while True:  # a marked character ([U+200B]) shows longer than it is: shrink by the overflow until it fits
        piece = graphemes_cut(source, max(keep, 0))
        revealed = reveal(piece, keep="\n")[0]
        text = '"' + revealed.replace("\n", f"{_LINE_BREAK}\n") if string else revealed
        if len(text) <= limit or not piece:
            return text, len(piece)
        keep = min(keep - 1, len(piece) * limit // len(text))


def pages(text: str, size: int) -> list[str]:
    """``text`` in pages of at most ``size`` characters, each ending at a grapheme boundary (a grapheme longer
    than ``size`` is a page of its own; one longer than any written text holds, :data:`_STREAM_SAFE`, is cut inside
    into pages of ``size``, so no page outgrows what holds it)."""
    if len(text) <= size:
        return [text]
    out: list[str] = []
    start = 0
    bounds = _boundaries(text)
    for i, b in enumerate(bounds[1:], 1):
        if b - start > size and bounds[i - 1] > start:
            out.append(text[start : bounds[i - 1]])
            start = bounds[i - 1]
        while b - start > size and b - bounds[i - 1] > _STREAM_SAFE:
            out.append(text[start : start + size])
            start += size
    out.append(text[start:])
    return [p for p in out if p]


# -- money ---------------------------------------------------------------------------------------------------
def money(value: Any, currency: str | None = None, places: int = 2) -> str:
    """``1234.5`` -> ``1,234.50`` (with ``currency``: ``EUR 1,234.50``): exact decimal, never rounded: a value with
    more decimals than ``places`` shows them all (``899.999``)."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not an amount")
    try:
        amount = Decimal(value) if isinstance(value, int | str) else Decimal(repr(float(value)))
    except (InvalidOperation, TypeError, ValueError):
        raise ValueError(f"{value!r} is not an amount") from None
    if not amount.is_finite():
        raise ValueError(f"{value!r} is not an amount")
    exponent = amount.as_tuple().exponent
    shown = max(places, -exponent if isinstance(exponent, int) else 0)
    text = f"{amount:,.{shown}f}"
    return f"{currency} {text}" if currency else text
