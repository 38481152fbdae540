"""The test suite. Importing it (pytest does, before tests/conftest.py and in each pytest-xdist worker) turns
bytecode caching back on where ``PYTHONDONTWRITEBYTECODE`` turned it off (as this project's Dockerfile and some
machines do): the suite starts hundreds of ``hitl`` processes, and each one compiled every module of ``hitl`` anew
(about 0.4 s of CPU a process, on two cores shared with the suite's own workers), the workers each recompiled the
test modules their assertions are rewritten in. The cache is written beside the sources (``__pycache__``, ignored by
git), and a changed source is compiled again as usual, so no run sees stale code. It also spares each process the
tests start a search for pydantic plugins, and each worker's collection most of the garbage collector's passes."""

from __future__ import annotations

import os
import sys

from hitl.cli.loading import loading

sys.dont_write_bytecode = False  # this process: pytest's rewritten test modules and what they import
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the processes the tests start
# No pydantic plugin is installed (none is a dependency), and each process the tests start looked for one: pydantic
# reads every installed distribution's entry points when it builds its first model (~50 ms of CPU a `hitl` process).
os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
# The OpenAI Agents SDK exports traces to OpenAI by default, and tests never send traffic off the machine. Said
# here, for the workers and every process the tests start, rather than by a session fixture calling the SDK: that
# fixture imported the SDK (about two seconds of CPU) in each worker that ran any adapter test, of any framework.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

# Collecting imports every test module and what it imports (thousands of modules, in each pytest-xdist worker); the
# collector walked them again and again as they were made (a fifth of a worker's collection CPU). It runs rarely
# until the tests start (tests/conftest.py: pytest_runtestloop), as it does while a `hitl` command loads.
loading()
