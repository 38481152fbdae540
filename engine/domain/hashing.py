"""Canonical JSON and the action hash (a user-facing contract, see DESIGN.md).

The action hash is the SHA-256 hex digest of the canonical JSON of ``{"tool": name, "args": args}``:
keys sorted, separators ``(",", ":")``, UTF-8 (non-ASCII kept as is), NaN and infinities refused.

Numbers are normalised before hashing so that the same amount hashes the same whichever way a JSON
parser or a template renderer produced it:

* an integral float becomes an integer (``899.0`` -> ``899``, ``-0.0`` -> ``0``);
* any other float is written with Python's shortest round-trip repr (``12.5``, ``0.1``);
* an integer (or an integral float) beyond ``±(2**53 - 1)`` is refused: past that, JSON interchange (RFC 8259
  section 6, I-JSON) carries no integer exactly, so what a reviewer is shown and what a peer runs could differ;
  such a number travels as a string;
* ``True``/``False`` stay booleans and are never numbers;
* tuples hash as lists; mapping keys must be strings.

Anything else (``Decimal``, ``datetime``, bytes, sets, objects) is refused: the caller converts it first,
because an implicit conversion would let two different actions share a hash.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from hitl.engine.errors import InvalidInput

__all__ = [
    "MAX_EXACT_INT",
    "action_hash",
    "batch_hash",
    "canonical_json",
    "check_exact",
    "exact_int",
    "identical",
    "normalize",
    "short_hash",
    "utf8_text",
]

MAX_EXACT_INT = 2**53 - 1
"""The largest integer JSON interchange carries exactly (every IEEE 754 double holds it): the limit for an integer
anywhere in an action's arguments, on every surface."""


def exact_int(text: str) -> int:
    """A JSON integer's text as an int, refused (:class:`InvalidInput`) beyond ``±MAX_EXACT_INT`` before any
    conversion of thousands of digits: ``json.loads(text, parse_int=exact_int)``."""
    if len(text.lstrip("-")) > len(str(MAX_EXACT_INT)):
        raise InvalidInput(
            f"a number of {len(text.lstrip('-'))} digits is beyond ±{MAX_EXACT_INT} (the largest integer JSON "
            "carries exactly); send it as a string"
        )
    return check_exact(int(text), "a number")


def check_exact(value: int, path: str) -> int:
    """``value`` if it is within ``±MAX_EXACT_INT``, else :class:`InvalidInput` naming the limit and what to do."""
    if -MAX_EXACT_INT <= value <= MAX_EXACT_INT:
        return value
    digits = len(str(abs(value))) if abs(value) < 10**4000 else "thousands of"
    raise InvalidInput(
        f"{path} is an integer of {digits} digits, beyond ±{MAX_EXACT_INT} (the largest JSON carries exactly); "
        "send it as a string",
        path=path,
    )


def normalize(value: Any, *, path: str = "args") -> Any:
    """Return ``value`` with numbers normalised and containers turned into plain dicts and lists."""
    kind = type(value)
    if kind is str or value is None or kind is bool:  # by exact type first: most values, on every call's path
        return value
    if kind is dict:
        return _normalize_object(value, path)
    if kind is int:
        return check_exact(value, path)
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return check_exact(int(value), path)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(
                f"{path} is {value!r}: NaN and infinities cannot be hashed; send a finite number", path=path
            )
        if value.is_integer():  # 3.0 and 1e3 are the integers 3 and 1000 (RFC 8785 writes them so)
            if not -MAX_EXACT_INT <= value <= MAX_EXACT_INT:
                raise InvalidInput(
                    f"{path} is {value!r}, a whole number beyond ±{MAX_EXACT_INT} (the largest integer JSON carries "
                    "exactly, whether written in digits or as 1e16); send it as a string",
                    path=path,
                )
            return int(value)
        return value
    if isinstance(value, Mapping):
        return _normalize_object(value, path)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [normalize(v, path=f"{path}[{i}]") for i, v in enumerate(value)]
    raise InvalidInput(
        f"{path} is a {type(value).__name__}, which has no canonical JSON form; convert it to a string or number",
        path=path,
    )


def _normalize_object(value: Mapping[Any, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise InvalidInput(f"{path} has a non-string key {k!r}; JSON object keys must be strings", path=path)
        # Strings are most values: kept without a call (and without building a path only errors read).
        out[k] = v if type(v) is str else normalize(v, path=f"{path}.{k}")
    return out


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value`` (after :func:`normalize`)."""
    return json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def identical(a: Any, b: Any) -> bool:
    """Whether two :func:`normalize`-d values have the same canonical JSON (so the same action hash), compared
    without encoding or hashing either: types must match exactly, so ``True`` is not ``1`` and ``"1"`` is not ``1``."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(identical(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def action_hash(tool: str, args: Mapping[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``{"tool": tool, "args": args}``; :class:`InvalidInput` when a string in
    them holds a lone surrogate, which UTF-8 cannot carry."""
    text = canonical_json({"tool": tool, "args": args})
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # checked only when it fails: the hot path encodes once
        utf8_text("args", text)
        raise
    return hashlib.sha256(raw).hexdigest()


def utf8_text(field: str, text: str | None) -> None:
    """Refuse (:class:`InvalidInput`) text that no UTF-8, JSON or store can carry: a lone surrogate (U+D800 to
    U+DFFF), which only an in-process Python ``str`` can hold. Refused where it arrives, so no store write, card or
    hash fails on it later with an encoding error."""
    if not isinstance(text, str) or text.isascii():  # a wrong type is the field's own check to refuse
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput(
            f"{field} holds a lone surrogate (U+{ord(text[e.start]):04X} at character {e.start}), which UTF-8 cannot "
            "carry; decode the text with errors='replace' (or drop the character) and send it again",
            path=field,
        ) from None


def batch_hash(items: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Hash of the ordered list of a batch's actions: adding, removing or reordering an item changes it."""
    doc = [{"tool": tool, "args": args} for tool, args in items]
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


SHORT_HASH_DIGITS = 16


def short_hash(digest: str) -> str:
    """The first 16 hex digits (64 bits): how people see an action hash, on cards and in the CLI alike.

    Buttons and API calls always carry the full hash; this is only for reading and comparing by eye.
    """
    return digest[:SHORT_HASH_DIGITS]
