"""Publish the saved benchmark reports: one Markdown page of tables and a PNG chart per figure group (matplotlib).

Reads every ``bench/results/<name>.json`` a benchmark saved (see ``bench/report.py``) and writes
``docs/pages/results.md`` and ``docs/pages/results/<name>-<n>.png``, which the docs' benchmark page links. Each
section names the machine, the versions and the date of its run, and puts the goal beside every figure. Run by
``make bench`` after the benchmarks; on its own: ``.venv/bin/python bench/publish.py``.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a build machine

import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import RESULTS  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "pages"
PAGE = DOCS / "results.md"
IMAGES = DOCS / "results"
ORDER = (
    "store",
    "cycle",
    "gate",
    "mcp",
    "slack",
    "redis_clients",
    "pending",
    "queue",
    "receipts",
    "card",
    "flood",
    "storm",
    "postgres",
    "cli",
    "consequence",
)
"""Sections in this order; any other report after them, by name."""

HITL, FLOOR, GOAL = "#2f6f9f", "#a0a0a0", "#c0392b"


def main(results: Path = RESULTS, page: Path = PAGE, images: Path = IMAGES) -> None:
    """Write ``page`` and the charts in ``images`` (a folder beside it) from every report saved in ``results``."""
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(results.glob("*.json"))]
    if not reports:
        raise SystemExit("no saved reports in bench/results; run `make bench` (or a benchmark) first")
    reports.sort(key=lambda r: (ORDER.index(r["name"]) if r["name"] in ORDER else len(ORDER), r["name"]))
    images.mkdir(parents=True, exist_ok=True)
    for old in images.glob("*.png"):
        old.unlink()
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`bench/publish.py`) from the benchmarks' own reports: each section is one run,",
        "with the machine, the versions and the date it was measured on, every figure beside its goal, and charts",
        "whose grey bars are the floors and peers measured in the same run. How each figure is measured, and why a",
        "goal is missed, is on the [benchmarks page](benchmarks.md).",
        "",
    ]
    for r in reports:
        lines += section(r, images)
    page.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    print(f"wrote {page} and {len(list(images.glob('*.png')))} charts")


def _script(name: str) -> str:
    """The benchmark behind a result saved before results named their script."""
    return "bench/redis_clients.py" if name == "redis_clients" else f"bench/{name}_bench.py"


def section(r: dict[str, Any], images: Path) -> list[str]:
    m, v = r["machine"], r["versions"]
    out = [
        f"## {r['title']}",
        "",
        f"`{r.get('script') or _script(r['name'])}`",
        f"on {m['cpu']} ({m['cores']} cores, {m['memory']}), {m['os']}, Python {m['python']}; {r['date']}.",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
        "",
        "| figure | measured | goal | |",
        "|---|---|---|---|",
    ]
    for row in r["rows"]:
        label = cell(row["label"])
        if row.get("heading") or not (row["measured"] or row["target"]):
            out.append(f"| **{label}** | | | |")  # what the rows after it belong to
            continue
        # A sub-figure (printed indented under the one before it) keeps its indent.
        indent = "&nbsp;" * 2 * (len(row["label"]) - len(row["label"].lstrip(" ")))
        verdict = "" if row["ok"] is None else ("met" if row["ok"] else "**missed**")
        out.append(f"| {indent}{label} | {cell(row['measured'])} | {cell(row['target'])} | {verdict} |")
    out.append("")
    for i, c in enumerate(r["charts"], 1):
        name = f"{r['name']}-{i}.png"
        draw(c, r, images / name)
        out += [f"![{cell(c['title'])}]({images.name}/{name})", ""]
    return out


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").strip()


def draw(c: dict[str, Any], r: dict[str, Any], path: Path) -> None:
    bars = c["bars"]
    height = 1.4 + 0.42 * len(bars)
    fig, ax = plt.subplots(figsize=(8, height), dpi=110)
    ys = list(range(len(bars)))[::-1]
    medians = [b["median"] for b in bars]
    errors = [[b["median"] - b["low"] for b in bars], [b["high"] - b["median"] for b in bars]]
    colors = [FLOOR if b["floor"] else HITL for b in bars]
    ax.barh(ys, medians, color=colors, xerr=errors, capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333333"})
    ax.set_yticks(ys, [b["label"] for b in bars], fontsize=8)
    for y, b in zip(ys, bars, strict=True):
        ax.annotate(f" {b['median']:.3g}", (b["high"], y), va="center", fontsize=7)
    if c["goal"] is not None:
        ax.axvline(c["goal"], color=GOAL, linestyle="--", linewidth=1)
        ax.annotate(
            f" goal {c['goal_label'] or c['goal']}", (c["goal"], ys[0] + 0.45), color=GOAL, fontsize=7, va="bottom"
        )
    ax.set_xlabel(c["unit"], fontsize=8)
    ax.set_title("\n".join(textwrap.wrap(c["title"], 62)), fontsize=9, loc="left")
    ax.tick_params(axis="x", labelsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    m = r["machine"]
    fig.text(
        0.01,
        0.01,
        f"{r['date']} · {m['cores']} cores · Python {m['python']} · hitl {r['versions'].get('hitl-gate', '?')}"
        " · bars: median, whiskers: min-max of rounds; grey: floors and peers",
        fontsize=6,
        color="#555555",
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
