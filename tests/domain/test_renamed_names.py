"""Names renamed in 0.2 keep working for one release, each use warned with HitlDeprecationWarning, and every one is
listed in the changelog's "Deprecated" section."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl import EngineError, ErrorCode, HitlDeprecationWarning, parse_config
from hitl.bot.metrics import StoreMetrics
from hitl.cli.stats import row_json
from hitl.engine.config.deprecations import RENAMED
from hitl.engine.domain.tally import Outcome, summarize
from hitl.engine.testing.conformance.adapters import PRACTICE_CONFIG
from hitl.engine.testing.conformance.agent_world import ADAPTER_CONFIG

ROOT = Path(__file__).resolve().parents[2]


def test_the_old_practice_key_still_configures_practice_and_warns() -> None:
    new = parse_config(ADAPTER_CONFIG + PRACTICE_CONFIG).oversight.practice
    with pytest.warns(HitlDeprecationWarning, match=r"'oversight\.seeded' is now 'oversight\.practice'.*0\.3"):
        old = parse_config(ADAPTER_CONFIG + PRACTICE_CONFIG.replace("practice:", "seeded:")).oversight.practice
    assert old == new and new.rate_for("refund", "approve") == 1.0


def test_both_spellings_at_once_are_refused() -> None:
    both = PRACTICE_CONFIG + "  seeded:\n    rate: 0.5\n"
    with pytest.raises(EngineError, match="keep only practice") as refused:
        parse_config(ADAPTER_CONFIG + both)
    assert refused.value.code is ErrorCode.POLICY_INVALID


def test_counts_stored_under_the_old_names_count_under_the_new() -> None:
    [row] = summarize(
        {
            ("refund", "approve", "seeded"): 2.0,
            ("refund", "approve", "practice"): 1.0,
            ("refund", "approve", "seeded_caught"): 1.0,
            ("refund", "approve", "practice_missed"): 2.0,
        }
    )
    assert (row.n(Outcome.PRACTICE), row.n(Outcome.PRACTICE_CAUGHT), row.n(Outcome.PRACTICE_MISSED)) == (3, 1, 2)
    assert row.catch_rate == pytest.approx(1 / 3) and "seeded" not in row.counts


def test_the_old_metric_and_json_fields_carry_the_new_figures() -> None:
    [row] = summarize({("refund", "approve", "practice_caught"): 1.0, ("refund", "approve", "practice_missed"): 3.0})
    metrics = StoreMetrics()
    metrics.rows = [row]
    families = {family.name: family for family in metrics.collect()}
    new, old = families["hitl_practice_catch_ratio"], families["hitl_seeded_catch_ratio"]
    assert [s.value for s in new.samples] == [s.value for s in old.samples] == [0.25]
    assert old.documentation.startswith("Deprecated:") and "hitl_practice_catch_ratio" in old.documentation
    fields = row_json(row)
    assert fields["seeded_catch_rate"] == fields["practice_catch_rate"] == 0.25
    assert (fields["seeded_caught"], fields["seeded_missed"]) == (fields["practice_caught"], 3)


def test_every_renamed_name_is_in_the_changelog() -> None:
    changelog = (ROOT / "docs" / "CHANGELOG.md").read_text()
    unreleased = changelog.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    deprecated = unreleased.split("### Deprecated", 1)[1].split("\n### ", 1)[0]
    for old, renamed in RENAMED.items():
        assert f"`{old}`" in deprecated and f"`{renamed.new}`" in deprecated, old
