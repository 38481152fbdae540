"""Stable draws for the oversight samples (spot checks, practice approvals): the same key is sampled the same way
whoever asks and however often, so replicas and replays agree. Pure: no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

__all__ = ["draw", "rate_for", "sampled"]


def draw(key: str) -> float:
    """A number in [0, 1) fixed by ``key``."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def sampled(key: str, rate: float) -> bool:
    """Whether ``key`` is in a sample taken at ``rate``."""
    return rate > 0.0 and draw(key) < rate


def rate_for(tool: str, tier: str, *, tools: Mapping[str, float], tiers: Mapping[str, float], rate: float) -> float:
    """The rate a sample takes ``tool`` at ``tier``: the tool's, else the tier's, else the overall one (0 to 1)."""
    return min(1.0, max(0.0, float(tools.get(tool, tiers.get(tier, rate)))))
