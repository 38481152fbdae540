"""The documentation site, built as `make docs` builds it (strictly), for the tests that read it."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["build_site", "shared_site"]

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


def shared_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once for the whole run, pytest-xdist's workers included (the first to ask builds it, under a
    lock; the others wait and read it): a strict build costs seconds of CPU, and every test that reads the site reads
    the same build. A failed build is built again by the next test that asks, which fails the same way."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the run's workers; each worker's own folder is under it
    site, built = root / "site", root / "site.built"
    with (root / "site.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            shutil.rmtree(site, ignore_errors=True)
            build_site(site)
            built.touch()
    return site
