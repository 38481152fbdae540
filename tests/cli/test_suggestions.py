"""Every command hitl's messages and help tell a person to type names a command and options that exist: a hint
that names a missing option sends the reader to an error instead of an answer."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer

from hitl.cli import app
from tests.cli.conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
_SUGGESTED = re.compile(r"`hitl ([^`]+)`")
_ROOT_COMMAND = typer.main.get_command(app)


def _command(words: list[str]) -> tuple[Any, list[str]]:
    """The deepest command ``words`` name (Typer's own Click), and the words after it."""
    command: Any = _ROOT_COMMAND
    while words and words[0] in getattr(command, "commands", {}):
        command = command.commands[words.pop(0)]
    return command, words


def test_every_suggested_command_and_option_exists() -> None:
    sources = [*ROOT.glob("hitl/**/*.py"), *ROOT.glob("engine/**/*.py"), *ROOT.glob("bot/**/*.py"), ROOT / "README.md"]
    sources += [*ROOT.glob("docs/pages/*.md")]
    checked = 0
    for path in sources:
        for suggestion in _SUGGESTED.findall(path.read_text()):
            words = suggestion.split()
            if not words or not re.fullmatch(r"[a-z-]+", words[0]):
                continue  # a template (`hitl {what}`) or a placeholder, filled in at run time
            command, rest = _command(list(words))
            assert command.name != "hitl" or not rest or rest[0].startswith("-"), f"{path.name}: `hitl {suggestion}`"
            options = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}
            for word in rest:
                flag = word.split("=")[0].strip("[]|(),.")
                if flag.startswith("--"):
                    assert flag in options, f"{path.name}: `hitl {suggestion}`: {command.name} has no {flag}"
            checked += 1
    assert checked > 40  # the messages, the help texts, the README and the pages


def test_every_usage_error_says_what_is_wrong_and_what_to_type(cli: Cli) -> None:
    for name, command in sorted(getattr(_ROOT_COMMAND, "commands", {}).items()):
        wrong = cli(name, "--nope")
        assert wrong.code == 2, name
        assert "No such option: --nope" in wrong.err and f"hitl {name}" in wrong.err, (name, wrong.err)
        if hasattr(command, "commands"):  # a group typed alone names the commands to type (as `hitl` runs)
            alone = subprocess.run(
                [sys.executable, "-m", "hitl", name], capture_output=True, text=True, timeout=60, cwd=ROOT
            )
            said = " ".join(alone.stderr.split())
            assert alone.returncode == 2 and f"`hitl {name}` needs a command" in said, (name, said)
            assert all(f"`hitl {name} {sub}`" in said for sub in command.commands), (name, said)
