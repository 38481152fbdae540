"""Output with no line ending in spaces. Rich pads table cells and help panels to the width of the terminal, which a
terminal hides and a file, a pipe or a copied block keeps."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, cast

__all__ = ["Trimmed", "trimmed_stdout"]

_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")
"""Spaces at a line's end, before any style codes that close it."""


class Trimmed:
    """A text stream (what Rich and ``print`` use of one: ``write``, ``flush``, ``isatty``) that writes to
    ``target()``, looked up at each write so a stream swapped meanwhile, as a test runner does, gets the output;
    each line without its trailing spaces."""

    def __init__(self, target: Callable[[], IO[str]]) -> None:
        self._target = target
        self._line = ""

    def write(self, s: str) -> int:
        *lines, self._line = (self._line + s).split("\n")
        out = self._target()
        for line in lines:
            out.write(_TRAILING.sub(r"\1", line) + "\n")
        return len(s)

    def flush(self) -> None:
        out = self._target()
        if self._line:
            out.write(self._line)
            self._line = ""
        out.flush()

    def isatty(self) -> bool:
        return bool(self._target().isatty())

    def fileno(self) -> Any:
        return self._target().fileno()


@contextmanager
def trimmed_stdout() -> Iterator[None]:
    """Within it, what is printed to ``sys.stdout`` loses its trailing spaces (for output another library prints,
    such as Typer's help)."""
    real = sys.stdout
    wrapper = Trimmed(lambda: real)
    sys.stdout = cast(IO[str], wrapper)
    try:
        yield
    finally:
        wrapper.flush()
        sys.stdout = real
