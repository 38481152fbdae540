"""The CLI prints one time format everywhere a person reads a time: ISO 8601 in UTC (``2027-01-15T08:00:00Z``)."""

from __future__ import annotations

import re

from tests.cli.conftest import Cli
from tests.cli.test_refund_cli import run_refund

DATE_LIKE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?")
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def test_every_time_the_cli_prints_has_the_one_format(cli: Cli) -> None:
    paused = run_refund(cli)
    aid, session = str(paused["approval_id"]), str(paused["session_id"])
    assert cli("resume", aid, "--reject", "--reason", "no", "--as", "U_SUPPORT1").code == 3
    run_refund(cli, "60")
    seen: list[str] = []
    for args in (
        ("show", aid),
        ("pending",),
        ("audit", aid),
        ("sessions", "list"),
        ("sessions", "show", session),
        ("stats",),
        ("show", aid, "--json"),
        ("audit", aid, "--json"),
    ):
        r = cli(*args)
        assert r.code in (0, 3), (args, r.out, r.err)
        seen += DATE_LIKE.findall(r.out)
    assert len(seen) >= 8, seen  # the commands above do print times
    assert [t for t in seen if not ONE_FORMAT.fullmatch(t)] == []
