"""Help that fits the screen it is read on: a flag shown as a flag, and a command's text as flowing paragraphs.

Typer prints a ``<bool>`` type after every on/off option (``--help <bool>``), which reads as if the flag took a
value, and keeps a docstring's line breaks, so text wrapped for the source breaks mid-sentence on an 80-column
terminal. The command classes here leave a flag's type column empty and join each paragraph's lines (a line that
starts a list item or is indented stays on its own), so the terminal wraps them."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup, TyperOption

from hitl.cli.trimmed import trimmed_stdout

__all__ = ["FlagCommand", "FlagGroup", "reflow"]


def reflow(text: str | None) -> str | None:
    """``text`` with each paragraph's lines joined by spaces; blank lines, list items and indented lines kept."""
    if not text:
        return text
    out: list[str] = []
    for line in text.splitlines():
        kept = not line.strip() or line.startswith((" ", "-", "*", "\b")) or not out or not out[-1].strip()
        if kept or out[-1].startswith("\b"):
            out.append(line)
        else:
            out[-1] = f"{out[-1]} {line}"
    return "\n".join(out)


def _plain_flags(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # shown in the type column instead of <bool>; a flag takes no value to name
    return params


class _FittingHelp:
    """What both classes add to Typer's: paragraphs that flow, flags without a type."""

    help: str | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        """The parameters (the help option included), flags without a type to show."""
        return _plain_flags(super().get_params(ctx))  # type: ignore[misc]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """Typer's help, its panels' lines without the spaces that pad them to the terminal's width."""
        with trimmed_stdout():
            super().format_help(ctx, formatter)  # type: ignore[misc]


class FlagCommand(_FittingHelp, TyperCommand):
    """A command whose help lists its flags without a ``<bool>`` type, its text in flowing paragraphs."""


class FlagGroup(_FittingHelp, TyperGroup):
    """A command group whose help lists its flags without a ``<bool>`` type, its text in flowing paragraphs."""
