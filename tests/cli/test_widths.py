"""Every command's output at 80 and 120 columns, as a person reads it in a terminal or a file: no line wider than the
terminal, none ending in spaces, no id, session or hash split across lines, no quoted value broken, and `hitl stats`
explaining every column it shows."""

from __future__ import annotations

import re

import pytest
import typer
import yaml

from hitl.cli import app
from hitl.cli.stats import COLUMNS as STATS_COLUMNS
from tests.cli.conftest import REFUND, Cli
from tests.cli.test_refund_cli import run_refund

WIDTHS = (80, 120)
_ROOT_COMMANDS = set(getattr(typer.main.get_command(app), "commands", {}))
_ID = re.compile(r"(apr|ses)_")
_WHOLE = re.compile(r"(apr|ses)_(?:[0-9A-Z]{10}(?![0-9A-Za-z])|…)")


def _read_right(text: str, width: int, what: str) -> None:
    """Every line fits (an error stays one line, for logs), ends in no space, and breaks no id or quoted value (a
    line cut at the edge ends in "…", saying so)."""
    for line in text.splitlines():
        assert len(line) <= width or line.startswith("error: "), f"{what}: wider than {width}: {line!r}"
        assert line == line.rstrip(), f"{what}: ends in spaces: {line!r}"
        assert len(_ID.findall(line)) == len(_WHOLE.findall(line)), f"{what}: an id cut: {line!r}"
        quotes = line.count('"') % 2 == 0 and line.count("“") == line.count("”")
        assert quotes or line.endswith("…"), f"{what}: a quote cut: {line!r}"


def _commands(aid: str, session: str) -> list[tuple[str, ...]]:
    return [
        ("pending",),
        ("show", aid),
        ("audit",),
        ("audit", aid),
        ("audit", "show", aid),
        ("audit", "verify"),
        ("stats",),
        ("sessions", "list"),
        ("sessions", "show", session),
        ("halts",),
        ("validate", str(REFUND)),
        ("policy", "explain", "refund", "--config", str(REFUND.parent / "hitl.yaml")),
        ("trust", "list"),
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_command_reads_right_at_80_and_120_columns(cli: Cli, width: int) -> None:
    paused = run_refund(cli, "120")
    aid, session = str(paused["approval_id"]), str(paused["session_id"])
    columns = {"COLUMNS": str(width)}
    ran = cli("run", str(REFUND), "--var", "order_id=78292", "--var", "amount=20", **columns)
    _read_right(ran.out + ran.err, width, "hitl run")
    for command in _commands(aid, session):
        r = cli(*command, **columns)
        assert r.code in (0, 1), (command, r.out, r.err)
        _read_right(r.out + r.err, width, "hitl " + " ".join(command))
        helped = cli(*command[: 2 if command[0] in ("sessions", "policy", "trust") else 1], "--help", **columns)
        _read_right(helped.out, width, "hitl " + command[0] + " --help")
    decided = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", **columns)
    assert decided.code == 0, decided.err
    _read_right(decided.out + decided.err, width, "hitl resume")
    config = ("--config", str(REFUND.parent / "hitl.yaml"))
    token = ("token", "new", "--name", "bot", "--as", "agent:bot", "--scope", "propose", "--scope", "read")
    for command in (
        ("expire",),
        ("purge", "--dry-run"),
        ("migrate",),
        ("init", f"starter{width}"),
        token,
        ("reviewers", "--as", "U_SUPPORT1", *config),
        ("practice", "--as", "U_SUPPORT1", *config),
    ):
        r = cli(*command, **columns)
        assert r.code == 0, (command, r.out, r.err)
        _read_right(r.out + r.err, width, "hitl " + " ".join(command))
    root = cli("--help", **columns)
    _read_right(root.out, width, "hitl --help")
    for name in sorted(_ROOT_COMMANDS):  # every command's help, the long-running ones' too
        _read_right(cli(name, "--help", **columns).out, width, f"hitl {name} --help")


def test_stats_explains_every_column_it_shows(cli: Cli) -> None:
    run_refund(cli, "120")
    shown = cli("stats", COLUMNS="80").out
    legend = " ".join(shown[shown.index("columns ") :].split("intervention latency")[0].split())
    for heading, meaning in STATS_COLUMNS:
        assert f"{heading}: {meaning}" in legend, heading
    table = shown[: shown.index("columns ")]
    assert all(heading in table for heading, _ in STATS_COLUMNS)


def test_a_new_tokens_entry_pastes_into_hitl_yaml_as_printed(cli: Cli) -> None:
    made = cli("token", "new", "--name", "bot", "--as", "agent:bot", "--scope", "propose", COLUMNS="80")
    entry = made.out.split("add under api.tokens in hitl.yaml:\n", 1)[1]
    [parsed] = yaml.safe_load("tokens:\n" + entry)["tokens"]
    assert parsed == cli("token", "new", "--name", "bot", "--as", "agent:bot", "--scope", "propose", "--json").json()[
        "entry"
    ] | {"sha256": parsed["sha256"]}
    assert re.fullmatch(r"[0-9a-f]{64}", parsed["sha256"]) and all(len(line) <= 80 for line in entry.splitlines())
