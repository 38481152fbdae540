"""How deep a JSON text nests, read from its bytes before any parser sees it.

A recursive parser (the standard library's, and the one it falls back to for an error message) meets a text nested
a thousand levels deep with a ``RecursionError``; a 2 KB body is enough. So a body is measured first, in linear time
and without recursion: escape pairs are dropped (``\\\\`` first, then ``\\"``, which pairs every backslash as a JSON
string does, left to right), the text between quotes (strings) is dropped, and what is left of brackets is summed.

An invalid text may measure differently than a parser would read it, but only after the point where the parser stops
with an error: everything before that point is measured as the parser nests it, so no parser recurses deeper than
the measure says.
"""

from __future__ import annotations

from itertools import accumulate

__all__ = ["MAX_NESTING", "nesting"]

MAX_NESTING = 64
"""The deepest a JSON body sent to ``hitl serve``'s API may nest (an object or array is one level): deeper is refused
as malformed (400 ``malformed_json``) before it is parsed."""

_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""An opening bracket as the signed byte +1, a closing one as -1."""


def nesting(text: bytes) -> int:
    """How many containers deep ``text`` nests at its deepest (0 for a scalar)."""
    unescaped = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(unescaped.split(b'"')[::2])  # an unterminated string runs to the end: dropped too
    steps = outside_strings.translate(_STEPS, _NOT_BRACKETS)
    return max(0, max(accumulate(memoryview(steps).cast("b")), default=0))
