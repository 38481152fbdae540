"""Drift's comparison (what ``consequence_ignore`` leaves out) and its configuration, checked when loaded."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.consequences import ConsequenceLimits, shaped
from hitl.engine.domain.drift import compared_digest
from hitl.engine.errors import EngineError


def _c(summary: str = "Pays 5", stamp: int = 1, cell: int = 1, diff: str = "") -> object:
    return shaped(
        {
            "summary": summary,
            "changes": {"balance": [10, 5], "generated_at": [0, stamp]},
            "table": [{"row": 1, "generated_at": cell}],
            "diff": diff,
        },
        ConsequenceLimits(),
    )


def test_ignored_names_are_a_part_a_change_label_or_a_column_at_the_top_only() -> None:
    a, b = _c(stamp=1, cell=1), _c(stamp=2, cell=2)
    assert compared_digest(a) != compared_digest(b)  # type: ignore[arg-type]
    assert compared_digest(a, ["generated_at"]) == compared_digest(b, ["generated_at"])  # type: ignore[arg-type]
    moved = _c(summary="Pays 6")
    assert compared_digest(a, ["generated_at"]) != compared_digest(moved, ["generated_at"])  # type: ignore[arg-type]
    assert compared_digest(a, ["summary"]) == compared_digest(moved, ["summary"])  # type: ignore[arg-type]
    assert compared_digest(a, ["diff"]) == compared_digest(_c(diff="x"), ["diff"])  # type: ignore[arg-type]
    deeper = shaped({"summary": "s", "changes": {"x": [{"generated_at": 1}, 2]}}, ConsequenceLimits())
    deeper2 = shaped({"summary": "s", "changes": {"x": [{"generated_at": 2}, 2]}}, ConsequenceLimits())
    assert compared_digest(deeper, ["generated_at"]) != compared_digest(deeper2, ["generated_at"])  # inside a value


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        ("{consequence_check: true}", "need the tool's consequence"),
        ('{consequence: "tests.consequence_tools:ticking", consequence_ignore: [x]}', "consequence_check: true"),
        (
            '{consequence: "tests.consequence_tools:ticking", consequence_check: true, consequence_ignore: [""]}',
            "at least 1",
        ),
        ('{consequence: "tests.consequence_tools:ticking", consequence_check: yes please}', "valid boolean"),
    ],
)
def test_a_check_without_its_consequence_or_an_ignore_without_a_check_is_refused_at_load(tool: str, says: str) -> None:
    with pytest.raises(EngineError, match=says):
        parse_config(f"policy:\n  tools:\n    pay: {tool}\n")
