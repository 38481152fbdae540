"""A copy of the refund example's ``hitl.yaml`` where a test wants it, with what it names beside it.

Its ``consequence:`` (``shop_consequences:refund``) is imported from the folder its ``hitl.yaml`` is in, as a
user's own module would be, so a copy written elsewhere takes ``shop_consequences.py`` along (``hitl init
--example refund`` does the same)."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).parents[1] / "examples" / "refund"
CONSEQUENCE = "shop_consequences.py"


def write_refund_config(path: Path, text: str) -> Path:
    """Write ``text`` (the example's ``hitl.yaml``, edited) to ``path`` and the example's consequence beside it."""
    path.write_text(text)
    shutil.copyfile(EXAMPLE / CONSEQUENCE, path.parent / CONSEQUENCE)
    return path
