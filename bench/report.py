"""A benchmark's published report: its figures beside their goals and floors, the machine, the versions, the date.

Each benchmark opens one with :func:`report` and records what it prints (:func:`record`, called by
``_common.row``) and the charts it wants drawn (:func:`chart`); on leaving, the report is written to
``bench/results/<name>.json``. ``bench/publish.py`` turns every saved report into the docs' tables and PNG charts.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
"""Where reports are saved, one JSON file per benchmark."""

PACKAGES = (
    "hitl-gate",
    "redis",
    "hiredis",
    "asyncpg",
    "pydantic",
    "langgraph",
    "strands-agents",
    "openai-agents",
    "pydantic-ai-slim",
    "mcp",
    "slack-bolt",
    "jsonschema-rs",
)
"""The packages whose versions a report names (those installed)."""


@dataclass
class Bar:
    """One contender in a chart: the min, median and max of its rounds (equal when there is one figure)."""

    label: str
    median: float
    low: float
    high: float
    floor: bool = False
    """A floor or peer measured in the same run, drawn apart from hitl's own bars."""


@dataclass
class Chart:
    """A horizontal bar chart: one bar per contender, the goal as a line."""

    title: str
    unit: str
    bars: list[Bar]
    goal: float | None = None
    goal_label: str = ""


@dataclass
class Report:
    """One benchmark's run."""

    name: str
    title: str
    date: str
    machine: dict[str, str]
    versions: dict[str, str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    script: str = ""
    """The benchmark that ran (``bench/<file>``): the page names it."""


_CURRENT: list[Report] = []


@contextmanager
def report(name: str, title: str) -> Iterator[Report]:
    """Record this benchmark's figures; saved to ``bench/results/<name>.json`` when the block ends without error."""
    now = datetime.datetime.now(datetime.UTC)
    date = now.strftime("%Y-%m-%d %H:%M UTC")
    script = f"bench/{Path(sys.argv[0]).name}"
    opened = Report(name=name, title=title, date=date, machine=machine(), versions=versions(), script=script)
    _CURRENT.append(opened)
    try:
        yield opened
    finally:
        _CURRENT.remove(opened)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(asdict(opened), indent=1) + "\n", encoding="utf-8")


def run_reported(
    name: str, title: str, description: str | None, main: Callable[..., Coroutine[Any, Any, None]], **options: int
) -> None:
    """Run a benchmark's ``main`` inside its :func:`report` ``name``: ``options`` are its whole-number command-line
    options (``--<option>``, each with its default), handed to ``main`` in the order given."""
    with report(name, title):
        parser = argparse.ArgumentParser(description=description)
        for option, default in options.items():
            parser.add_argument(f"--{option}", type=int, default=default)
        ns = parser.parse_args()
        asyncio.run(main(*(getattr(ns, option) for option in options)))


def record(label: str, measured: str, target: str = "", ok: bool | None = None) -> None:
    """A printed figure, kept by the open report (if any)."""
    if _CURRENT:
        _CURRENT[-1].rows.append({"label": label, "measured": measured, "target": target, "ok": ok})


def record_heading(text: str) -> None:
    """A printed heading (what the rows after it belong to), kept by the open report (if any)."""
    if _CURRENT:
        _CURRENT[-1].rows.append({"label": text.strip(), "measured": "", "target": "", "ok": None, "heading": True})


def chart(
    title: str,
    unit: str,
    bars: list[Bar],
    *,
    goal: float | None = None,
    goal_label: str = "",
) -> None:
    """A chart for the open report (if any)."""
    if _CURRENT:
        _CURRENT[-1].charts.append(Chart(title=title, unit=unit, bars=bars, goal=goal, goal_label=goal_label))


def bar(label: str, rounds: list[float], *, floor: bool = False) -> Bar:
    """A contender's bar from its per-round figures."""
    return Bar(label=label, median=statistics.median(rounds), low=min(rounds), high=max(rounds), floor=floor)


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": model or platform.processor() or "unknown",
        "cores": str(os.cpu_count()),
        "memory": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    """The versions of what was measured: hitl, the servers, the drivers and the peers."""
    out: dict[str, str] = {}
    for package in PACKAGES:
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    out["sqlite"] = sqlite3.sqlite_version
    for server in ("redis-server", "postgres"):
        found = shutil.which(server) or next(
            (str(p) for p in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{server}"))), None
        )
        if found is None:
            continue
        try:
            said = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        out[server] = next((w.removeprefix("v=") for w in said.split() if w[:1].isdigit() or w.startswith("v=")), said)
    return out
