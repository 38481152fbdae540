"""The sandbox draws every emoji the bot sends as Slack would: each ``:shortcode:`` in the bot's messages and each
rich-text emoji element it builds is drawn as its emoji by the sandbox page in Chromium, never left as text."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hitl.demo.launch import Sandbox
from tests.sandbox.test_browser import browser_page

BOT = Path(__file__).resolve().parents[2] / "bot"
SHORTCODE = re.compile(r"(?<![\w:]):([a-z0-9_+\-]+):(?![\w:`])")
"""A Slack emoji code as a message carries it; not a Sphinx role (``:mod:`x```) nor a word's colons (``slack:a:``)."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (they are never sent)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def sent_emoji() -> set[str]:
    """Every emoji the bot's source can send: codes in its string literals, and rich-text emoji elements' names."""
    codes: set[str] = set()
    for path in BOT.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                codes.update(SHORTCODE.findall(node.value))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_emoji":
                codes.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return codes


def test_the_bot_source_is_read_for_its_emoji() -> None:
    found = sent_emoji()
    # The scan finds what the bot sends (a check that it reads anything at all), and no Sphinx role or word.
    assert {"warning", "white_check_mark", "handshake", "arrow_right_hook", "scissors"} <= found
    assert not found & {"mod", "func", "class", "meth", "data", "group"}


async def test_the_sandbox_draws_every_emoji_the_bot_sends(sandbox: Sandbox) -> None:
    codes = sorted(sent_emoji())
    async with browser_page() as page:
        await page.goto(sandbox.url)
        drawn = await page.evaluate("codes => codes.map(c => [c, emoji(':' + c + ':'), EMOJI[c] || null])", codes)
    as_text = [code for code, text, _ in drawn if text == f":{code}:"]
    as_element = [code for code, _, element in drawn if element is None]
    assert as_text == [] and as_element == [], f"the sandbox draws these as text: {sorted({*as_text, *as_element})}"
