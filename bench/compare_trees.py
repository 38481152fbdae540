"""Two checkouts' benchmarks in one session, interleaved: each round runs every benchmark on one tree, then on the
other (the order alternating round by round: old, new, new, old...), so a slow patch of a shared machine hits both.

Each run is the tree's own `bench/<name>_bench.py`, in a new process with ``PYTHONPATH`` set to that tree, its
figures read back from the report it saves (`bench/results/<name>.json`, put back as it was afterwards). The table
gives each figure's median over the rounds and its spread (min-max), per tree.

    .venv/bin/python bench/compare_trees.py ../old-tree . --rounds 3

Smaller runs than `make bench` (the arguments below), so that several rounds fit in one session: the click
benchmark's 50 warm-up cards and its own are posted by `hitl serve` at Slack's pace (one a second) before any click,
so its clicks are few here. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Figure:
    """One row of a benchmark's report: the section it is under (the start of its heading) and its label."""

    name: str
    section: str
    label: str


@dataclass(frozen=True)
class Bench:
    """One benchmark script, the arguments of a round's run, and the figures taken from its report."""

    script: str
    report: str
    args: tuple[str, ...]
    figures: tuple[Figure, ...]


BENCHES = (
    Bench(
        "cycle_bench.py",
        "cycle",
        ("-n", "200", "--rounds", "2", "--warm", "30"),
        (
            Figure("cycle, SQLite NORMAL (ms)", "hitl cycle", "hitl SQLite NORMAL"),
            Figure("cycle, SQLite FULL (ms)", "hitl cycle", "hitl SQLite FULL"),
            Figure("cycle, Redis (ms)", "hitl cycle", "hitl Redis"),
            Figure("bytes per finished run, SQLite NORMAL", "bytes stored", "hitl SQLite NORMAL"),
            Figure("bytes per finished run, Redis", "bytes stored", "hitl Redis"),
        ),
    ),
    Bench(
        "store_bench.py",
        "store",
        ("--seq", "500", "--conc", "2000", "--sizes", "1000"),
        (
            Figure("decide, Redis, sequential median (ms)", "Redis store", "decide latency, sequential median"),
            Figure(
                "decide, SQLite NORMAL, sequential median (ms)",
                "SQLite store (WAL, synchronous=NORMAL",
                "decide latency, sequential median",
            ),
            Figure("decide, Redis, 50 concurrent (/s)", "Redis store", "decide throughput, 50 concurrent callers"),
        ),
    ),
    Bench(
        "slack_bench.py",
        "slack",
        ("-n", "20", "-c", "10", "--light", "20", "--alone", "10", "--rounds", "1", "--wakeups", "5"),
        (
            Figure(
                "click: serve CPU per click, 10 concurrent (ms)",
                "hitl Slack",
                "serve CPU per click (10 concurrent), ms",
            ),
            Figure(
                "click: ack p50, one at a time (ms)", "hitl Slack", "click ack p50, unloaded (one click at a time), ms"
            ),
        ),
    ),
    Bench(
        "flood_bench.py",
        "flood",
        ("--rounds", "1"),
        (
            Figure("flood: 300 proposals, floor (s)", "a flood", "floor: all 300 proposals, s"),
            Figure("flood: 300 proposals under Slack's limits (s)", "a flood", "limited: all 300 proposals, s"),
            Figure(
                "flood: Approve all on the biggest group (s)",
                "a flood",
                "limited: Approve all on the biggest group, recorded and shown, s",
            ),
        ),
    ),
    Bench(
        "receipt_bench.py",
        "receipts",
        ("--rounds", "5"),
        (
            Figure(
                "receipt: added to a claim, SQLite (ms)",
                "an execution claim on SQLite",
                "what a receipt adds to a claim (median)",
            ),
            Figure(
                "receipt: added to a claim, Redis (ms)",
                "an execution claim on Redis",
                "what a receipt adds to a claim (median)",
            ),
            Figure(
                "receipt: added to a claim, PostgreSQL (ms)",
                "an execution claim on PostgreSQL",
                "what a receipt adds to a claim (median)",
            ),
        ),
    ),
)
"""What is compared: cycle, decide, click, flood, receipt and bytes per run."""


def value(measured: str) -> float:
    """A report's figure as a number: the middle of "min / median / max", else its first number."""
    parts = measured.split(" / ")
    text = parts[len(parts) // 2] if len(parts) == 3 else measured
    found = re.search(r"-?[\d,]*\.?\d+", text)
    if found is None:
        raise ValueError(f"no number in the figure {measured!r}")
    return float(found.group().replace(",", ""))


def figures_of(report: dict[str, object], bench: Bench) -> dict[str, float]:
    """The bench's figures found in its saved report, by the section (heading) each is under."""
    found: dict[str, float] = {}
    section = ""
    rows = report["rows"]
    assert isinstance(rows, list)
    for row in rows:
        if row.get("heading"):
            section = row["label"]
            continue
        for figure in bench.figures:
            if section.startswith(figure.section) and row["label"] == figure.label and figure.name not in found:
                found[figure.name] = value(row["measured"])
    return found


def run(tree: Path, bench: Bench) -> dict[str, float]:
    """One run of ``bench`` in ``tree``, its own report put back as it was afterwards."""
    saved = tree / "bench" / "results" / f"{bench.report}.json"
    before = saved.read_bytes() if saved.exists() else None
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.monotonic()
    try:
        subprocess.run(
            [sys.executable, str(tree / "bench" / bench.script), *bench.args],
            cwd=tree,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found = figures_of(json.loads(saved.read_text()), bench)
    finally:
        if before is None:
            saved.unlink(missing_ok=True)
        else:
            saved.write_bytes(before)
    print(f"  {tree.name} {bench.script}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return found


def spread(samples: list[float]) -> str:
    """Median and min-max of a figure's rounds."""
    if not samples:
        return "(not found)"
    return f"{statistics.median(samples):,.3f} ({min(samples):,.3f}-{max(samples):,.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", action="append", help="only these scripts (repeatable), e.g. cycle_bench.py")
    opts = parser.parse_args()
    trees = (opts.old.resolve(), opts.new.resolve())
    samples: dict[tuple[Path, str], list[float]] = {}
    benches = [b for b in BENCHES if not opts.only or b.script in opts.only]
    for r in range(opts.rounds):
        print(f"round {r + 1} of {opts.rounds}", file=sys.stderr, flush=True)
        for tree in trees if r % 2 == 0 else trees[::-1]:
            for bench in benches:
                for name, number in run(tree, bench).items():
                    samples.setdefault((tree, name), []).append(number)
        table(trees, benches, samples, r + 1)  # after every round: a run cut short still leaves its figures


def table(
    trees: tuple[Path, Path], benches: list[Bench], samples: dict[tuple[Path, str], list[float]], rounds: int
) -> None:
    """The figures so far, one row each: median and spread per tree."""
    print(f"| figure (median of {rounds} rounds, min-max) | {trees[0].name} | {trees[1].name} |")
    print("|---|---|---|")
    for bench in benches:
        for figure in bench.figures:
            old, new = samples.get((trees[0], figure.name), []), samples.get((trees[1], figure.name), [])
            print(f"| {figure.name} | {spread(old)} | {spread(new)} |")
    print(flush=True)


if __name__ == "__main__":
    main()
