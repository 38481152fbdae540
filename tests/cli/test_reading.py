"""The demo transcript's reading of Slack's wire text: what a person sees in Slack."""

from __future__ import annotations

from hitl.demo.reading import as_seen


def test_slack_wire_text_reads_as_slack_shows_it() -> None:
    assert (
        as_seen(":no_entry: You are not a reviewer: it needs *support*.")
        == "⛔ You are not a reviewer: it needs support."
    )
    assert as_seen("`a &lt;!channel&gt; *b*`") == "a <!channel> *b*"  # inside code nothing formats
    assert as_seen("<@U_FIN1> approved <!date^1800000000^{date_short_pretty} {time}|2027-01-15 08:00 UTC>") == (
        "@U_FIN1 approved 2027-01-15 08:00 UTC"
    )
    assert as_seen(":unknown_code: &amp; more") == ":unknown_code: & more"
