"""A command's start: the cyclic garbage collector runs rarely while the command loads what it runs with.

``hitl serve`` imports about 1,200 modules before it answers; their classes, functions and constants live as long
as the process, and the collector, at Python's thresholds (a young collection every 700 new objects), walked them
again and again as they were made: about a seventh of a start's CPU, paid by every ``hitl`` process (the test suite
starts hundreds). While loading, a young collection waits for 50,000 new objects instead; where the command's work
begins (:func:`loaded`), what loading made is set aside from the collector for good (``gc.freeze``: about 120,000
objects for ``hitl serve``, of which a few dozen are garbage, against every full collection walking them all again
while the command works), and the work runs at the thresholds the process had. A command that never says so still
collects, only less often, and exits soon.
"""

from __future__ import annotations

import gc

__all__ = ["loaded", "loading"]

_LOADING_YOUNG = 50_000
"""Objects made between two young collections while a command loads (Python's default is 700)."""

_usual: tuple[int, int, int] | None = None


def loading() -> None:
    """Collect rarely until :func:`loaded` (idempotent: the thresholds to restore are those seen first)."""
    global _usual
    if _usual is None:
        _usual = gc.get_threshold()
        gc.set_threshold(max(_usual[0], _LOADING_YOUNG), *_usual[1:])


def loaded() -> None:
    """The command's work begins: what loading made frozen, and the thresholds the process had before
    :func:`loading` back (nothing is frozen when :func:`loading` was not called: a library's caller keeps its own)."""
    global _usual
    if _usual is not None:
        gc.freeze()
        gc.set_threshold(*_usual)
        _usual = None
