"""CLI startup benchmark: how long `hitl --version`, `hitl --help` and one real command take as new processes, beside
the interpreter's own start and Typer's import, in one run with interleaved rounds.

Every `hitl` call (and every test that starts one) pays its startup, so a command imports what it uses when it runs:
listing the commands loads no store, runtime, Slack or server (tests/cli/test_startup.py checks the modules; this
measures the time). The real command is `hitl halts --json` on an empty SQLite store: its imports, the store opened,
one read. Floors: `python -c pass`, `python -c "import typer"` and a one-command Typer app's `--help` (what no `hitl`
command, and no help, can go below). Target: `hitl --help` within 0.25 s of Typer's own help (the median difference of
CPU time, which a shared machine moves less than the wall time; both are printed). Run with `make bench` or
`.venv/bin/python bench/cli_bench.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, row, spread  # noqa: E402
from report import bar, chart, report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TYPER_HELP = "import typer; typer.run(lambda name='': None)"
"""A one-command Typer app (run with ``--help``): what printing help costs any Typer command, its rich panels
included."""
TYPER_HELP_FLOOR = "a one-command Typer app's --help (floor)"


def seconds(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) from starting ``argv`` as a new process to its exit (which must be 0).
    CPU time is what the process itself spent: on a shared machine it moves less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(rounds: int) -> None:
    python = sys.executable
    with tempfile.TemporaryDirectory() as work:
        store = f"sqlite:///{work}/bench.db"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "HITL_STORE": store}
        env = {k: v for k, v in env.items() if k not in ("HITL_API_URL", "HITL_TOKEN", "HITL_CONFIG")}
        seconds([python, "-m", "hitl", "migrate"], env, work)  # the store the real command reads
        contenders = {
            "python -c pass (floor)": [python, "-c", "pass"],
            "import typer (floor)": [python, "-c", "import typer"],
            "a one-command Typer app's --help (floor)": [python, "-c", TYPER_HELP, "--help"],
            "hitl --version": [python, "-m", "hitl", "--version"],
            "hitl --help": [python, "-m", "hitl", "--help"],
            "hitl halts --json (a real command)": [python, "-m", "hitl", "halts", "--json"],
        }
        wall: dict[str, list[float]] = {name: [] for name in contenders}
        cpu: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(rounds):  # interleaved: every contender meets the same machine
            for name, argv in contenders.items():
                took, spent = seconds(argv, env, work)
                wall[name].append(took)
                cpu[name].append(spent)
    for what, samples in (("wall", wall), ("CPU", cpu)):
        heading(f"a new process to its exit, {what} time ({rounds} interleaved rounds, min / median / max, s)")
        for name, taken in samples.items():
            row(name, spread(taken, "{:.3f}"))
    over = statistics.median(cpu["hitl --help"]) - statistics.median(cpu[TYPER_HELP_FLOOR])
    row("hitl --help over Typer's own help (CPU, median)", f"{over:.3f} s", "<= 0.25 s", over <= 0.25)
    # hitl's commands first, the floors (grey) after them.
    bars = [bar(name, taken, floor=name.endswith("(floor)")) for name, taken in reversed(wall.items())]
    chart("A hitl command as a new process (wall time), s", "s", bars)


if __name__ == "__main__":
    with report("cli", "How long a hitl command takes to start"):
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--rounds", type=int, default=10)
        ns = parser.parse_args()
        main(ns.rounds)
