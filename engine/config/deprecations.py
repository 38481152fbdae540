"""Names hitl renamed and still accepts for one release, each with a warning that names its replacement.

A renamed configuration key or public name keeps working until the release after the one that renamed it; every
use warns with :class:`HitlDeprecationWarning` (a ``FutureWarning``, so Python shows it by default: the people who
write ``hitl.yaml`` are its users, not only developers running with ``-W``). The changelog lists each under
"Deprecated".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

__all__ = ["RENAMED", "HitlDeprecationWarning", "Renamed", "warn_renamed"]


class HitlDeprecationWarning(FutureWarning):
    """A name hitl renamed: it still works for one release; use the new one."""


@dataclass(frozen=True)
class Renamed:
    """One renamed name: where it is used, the old and new spelling, and the release that drops the old one."""

    where: str
    old: str
    new: str
    removed_in: str

    def message(self) -> str:
        """What the warning says: the old name, the new one, and when the old one stops working."""
        return f"{self.where} {self.old!r} is now {self.new!r}; {self.old!r} stops working in hitl {self.removed_in}"


RENAMED: dict[str, Renamed] = {
    "oversight.seeded": Renamed("hitl.yaml key", "oversight.seeded", "oversight.practice", "0.3"),
    "hitl_seeded_catch_ratio": Renamed("metric", "hitl_seeded_catch_ratio", "hitl_practice_catch_ratio", "0.3"),
    **{
        old: Renamed("`hitl stats --json` field", old, old.replace("seeded", "practice"), "0.3")
        for old in ("seeded", "seeded_caught", "seeded_missed", "seeded_catch_rate")
    },
}
"""Every name still accepted under its old spelling, by old name."""


def warn_renamed(old: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` (a key of :data:`RENAMED`) was used."""
    warnings.warn(RENAMED[old].message(), HitlDeprecationWarning, stacklevel=stacklevel)
