"""The Wilson score interval the oversight page gives the practice catch rate: known values, within 0..1, and
nothing to say of no practice approval."""

from __future__ import annotations

import pytest

from hitl.engine.domain.intervals import wilson


@pytest.mark.parametrize(
    ("hits", "n", "low", "high"),
    [(5, 10, 0.2366, 0.7634), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (1, 1, 0.2065, 1.0)],
)
def test_known_intervals(hits: int, n: int, low: float, high: float) -> None:
    found = wilson(hits, n)
    assert found is not None
    assert found[0] == pytest.approx(low, abs=1e-4) and found[1] == pytest.approx(high, abs=1e-4)


def test_no_practice_approval_has_no_interval() -> None:
    assert wilson(0, 0) is None
