"""`make bench`'s last step: the saved reports become the docs' results page, each figure beside its goal with the
machine, the versions and the date, and a PNG chart per figure group."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_a_saved_report_is_published_as_a_table_and_charts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    report = importlib.import_module("report")
    common = importlib.import_module("_common")
    publish = importlib.import_module("publish")
    results = tmp_path / "results"
    monkeypatch.setattr(report, "RESULTS", results)

    with report.report("gate", "What an agent adapter adds"):
        common.heading("gate overhead on sqlite (31 rounds)")
        common.row("strands: overhead per allowed call", "35.2 µs", "<= 25 µs", False)
        common.row("  strands, a no-op handler (floor)", "4.1 µs", "(same run)")
        common.row("langgraph: overhead per allowed call", "3.9 µs", "<= 25 µs", True)
        common.row("a figure without a goal", "12 | 13", "")
        report.chart(
            "Added per allowed call",
            "µs",
            [report.bar("strands", [30.0, 35.2, 44.0]), report.bar("no-op hook (floor)", [2.0, 4.1, 9.0], floor=True)],
            goal=25.0,
            goal_label="<= 25 µs",
        )
    common.row("printed after the report closed: not in it", "1", "")
    saved = json.loads((results / "gate.json").read_text())
    assert [r["label"] for r in saved["rows"]][-1] == "a figure without a goal"
    assert saved["machine"]["cores"] and saved["versions"]["hitl-gate"] and saved["date"].endswith("UTC")

    page, images = tmp_path / "docs" / "results.md", tmp_path / "docs" / "results"
    publish.main(results, page, images)
    text = page.read_text()
    assert "## What an agent adapter adds" in text
    assert "| **gate overhead on sqlite (31 rounds)** | | | |" in text  # the rows after it are sqlite's
    assert "| strands: overhead per allowed call | 35.2 µs | <= 25 µs | **missed** |" in text
    assert "| &nbsp;&nbsp;&nbsp;&nbsp;strands, a no-op handler (floor) | 4.1 µs | (same run) |  |" in text
    assert "| langgraph: overhead per allowed call | 3.9 µs | <= 25 µs | met |" in text
    assert "| a figure without a goal | 12 \\| 13 |  |  |" in text  # a cell's bar does not split the table
    assert f"{saved['machine']['cores']} cores" in text and saved["date"] in text and "hitl-gate" in text
    assert "![Added per allowed call](results/gate-1.png)" in text
    assert (images / "gate-1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_publishing_without_any_report_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    publish = importlib.import_module("publish")
    with pytest.raises(SystemExit, match="make bench"):
        publish.main(tmp_path / "none", tmp_path / "results.md", tmp_path / "results")
    assert not (tmp_path / "results.md").exists()
