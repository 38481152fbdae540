"""The documentation site, built as `make docs` builds it (strictly), for the tests that read it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["build_site"]

ROOT = Path(__file__).resolve().parents[1]


def build_site(into: Path) -> None:
    """Build the site into ``into``; fails the test with mkdocs' own message when the strict build does."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"), "-d", str(into)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
