"""How sure a rate is: the Wilson score interval of a proportion (the practice catch rate's). Pure: no I/O.

Wilson's rather than the normal approximation: it stays within 0..1 and means something for the few practice
approvals a small team decides (3 caught of 3 is not "100%, certain")."""

from __future__ import annotations

import math

__all__ = ["Z95", "wilson"]

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""


def wilson(hits: int, n: int, *, z: float = Z95) -> tuple[float, float] | None:
    """The interval (low, high) that holds the true rate of ``hits`` in ``n`` with 95% confidence (None: ``n`` is
    0, nothing to say)."""
    if n <= 0:
        return None
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
