"""The test suite. Importing it (pytest does, before tests/conftest.py and in each pytest-xdist worker) turns
bytecode caching back on where ``PYTHONDONTWRITEBYTECODE`` turned it off (as this project's Dockerfile and some
machines do): the suite starts hundreds of ``hitl`` processes, and each one compiled every module of ``hitl`` anew
(about 0.4 s of CPU a process, on two cores shared with the suite's own workers), the workers each recompiled the
test modules their assertions are rewritten in. The cache is written beside the sources (``__pycache__``, ignored by
git), and a changed source is compiled again as usual, so no run sees stale code."""

from __future__ import annotations

import os
import sys

from hitl.cli.loading import loading

sys.dont_write_bytecode = False  # this process: pytest's rewritten test modules and what they import
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the processes the tests start

# Collecting imports every test module and what it imports (thousands of modules, in each pytest-xdist worker); the
# collector walked them again and again as they were made (a fifth of a worker's collection CPU). It runs rarely
# until the tests start (tests/conftest.py: pytest_runtestloop), as it does while a `hitl` command loads.
loading()
