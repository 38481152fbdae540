"""Sizes that cannot slip: no function of ours over 90 lines, no module over 600 (400 in ``bot/``, whose modules are
small by design, as bolt-python's are), with no exception: the modules that were over 600 when the bound was set
(``hitl/cli/app.py``, ``hitl/api/models.py``, ``engine/testing/conformance/adapters.py``) were split along their
concepts, and none may be allowed back over it.

Size is a symptom, not a target (STYLE.md): a function or module that reaches a bound asks to be split along its
concepts, not squeezed under the number.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "bot", "hitl")
"""Our code (``hitl/`` holds links to ``engine/`` and ``bot/``, which rglob does not follow: each is read once)."""

MOST_FUNCTION_LINES = 90
MOST_MODULE_LINES = 600
MOST_BOT_MODULE_LINES = 400


def _modules() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_scan_reads_every_package() -> None:
    names = {_name(p) for p in _modules()}
    assert {"engine/service.py", "bot/outbound/notifier.py", "hitl/cli/app.py"} <= names


def test_no_function_is_over_90_lines() -> None:
    """From its ``def`` to its last line (a nested function counts on its own, and inside its parent)."""
    long: list[str] = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                size = node.end_lineno - node.lineno + 1
                if size > MOST_FUNCTION_LINES:
                    long.append(f"{_name(path)}:{node.lineno} {node.name} ({size} lines)")
    assert long == []


def test_no_module_is_over_600_lines() -> None:
    """A module that reaches the bound is split along its concepts (a module of its own for each group of commands,
    each API area's models, each part of a suite), never allowlisted."""
    over = [f"{_name(p)} ({n} lines)" for p in _modules() if (n := _lines(p)) > MOST_MODULE_LINES]
    assert over == [], "split it along its concepts (STYLE.md), as hitl/cli/app.py and hitl/api/models.py were"


def test_no_bot_module_is_over_400_lines() -> None:
    bot = [p for p in _modules() if _name(p).startswith("bot/")]
    assert [f"{_name(p)} ({n} lines)" for p in bot if (n := _lines(p)) > MOST_BOT_MODULE_LINES] == []
