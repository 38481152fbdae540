"""An action's arguments as a card shows them: each in a box no value can break out of.

Each argument is a name line and its value in a ``rich_text_preformatted`` element: Slack keeps a preformatted
element's text literal and its line breaks inside the box, so no value can format, mention, link, or draw a label
or a second value (``"bob@example.com\\n*amount*\\n`1`"`` stays one boxed string). The name line shows the argument's
name in code style, its type, and, only from the declared schema (``hitl.yaml``), its title, currency and help:
a caller's own schema is untrusted and labels nothing. Values come from :mod:`hitl.engine.domain.display`: typed,
every character marked, look-alikes warned about. A value longer than its share of the card is cut at a grapheme
boundary and says how long it is; a button opens it in full (:mod:`hitl.bot.views.full_value`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hitl.bot.requests.button_values import parse_button_value
from hitl.engine.domain.display import Shown, excerpt, reveal, show
from hitl.engine.domain.models import Approval

__all__ = [
    "ACTION_FULL_VALUE",
    "ALL_ARGUMENTS",
    "CARD_VALUES_BUDGET",
    "MOST_ON_CARD",
    "Declared",
    "argument_blocks",
    "full_value_button",
    "name_line",
    "parse_full_value",
    "reason_index",
    "value_at",
]

ACTION_FULL_VALUE = "hitl_full_value"
"""The action id of a card's "Show in full" buttons."""
ALL_ARGUMENTS = -1
"""The index a "Show in full" button gives for every argument at once (the exact JSON)."""
CARD_VALUES_BUDGET = 6000
"""Characters of values one card shows in all (Slack refuses a message near 13k characters of text)."""
_MOST_PER_VALUE = 1200
_LEAST_PER_VALUE = 120
MOST_ON_CARD = 40
"""Arguments a card lists; the rest are counted, and open in full with the others."""
_MOST_BUTTONS = 5

Declared = Callable[[str], Mapping[str, Any] | None]
"""A tool's declared argument schema (``hitl.yaml``'s), or None: the only source of labels, help and currency."""


def _text(text: str, **style: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "text", "text": text}
    if style:
        out["style"] = style
    return out


def _emoji(name: str) -> dict[str, Any]:
    return {"type": "emoji", "name": name}


def reason_index(decision: int) -> int:
    """The index a "Show reason in full" button gives for the reason of the approval's ``decision``-th decision
    (below :data:`ALL_ARGUMENTS`, so no argument's index is ever one)."""
    return ALL_ARGUMENTS - 1 - decision


def value_at(a: Approval, index: int) -> tuple[str, Any] | None:
    """The argument at ``index`` of the arguments as they run (:data:`ALL_ARGUMENTS`: all of them; below it, a
    decision's reason: :func:`reason_index`), or None."""
    args = a.execute_args
    if index == ALL_ARGUMENTS:
        return ("all arguments", dict(args))
    if index < ALL_ARGUMENTS:
        at = ALL_ARGUMENTS - 1 - index
        reason = a.decisions[at].reason if at < len(a.decisions) else None
        return (f"reason given by {a.decisions[at].reviewer}", reason) if reason else None
    names = list(args)
    return (names[index], args[names[index]]) if 0 <= index < len(names) else None


def name_line(
    name: str, shown: Shown, spec: Mapping[str, Any] | None, *, most_warnings: int = 3
) -> list[dict[str, Any]]:
    """An argument's name line: its declared title (bold) if any, its name in code style, its type and currency,
    then each warning on a line of its own; all text elements, so nothing in a name formats."""
    title = spec.get("title") if spec else None
    currency = spec.get("x-currency") if spec else None
    elements: list[dict[str, Any]] = []
    if isinstance(title, str) and title.strip() and title.strip() != name:
        elements += [_text(title.strip()[:60], bold=True), _text("  ")]
    elements.append(_text(reveal(name[:120])[0], code=True))  # a name's line break shows, so it stays one line
    kind = str(shown.kind) + (f", {currency.strip()[:12]}" if isinstance(currency, str) and currency.strip() else "")
    elements.append(_text(f"  {kind}", italic=True))
    about = spec.get("description") if spec else None
    if isinstance(about, str) and about.strip():
        elements.append(_text(f"\n{about.strip()[:150]}", italic=True))
    for warning in shown.warnings[:most_warnings]:  # a card shows three; the full view all of them
        elements += [_text("\n"), _emoji("warning"), _text(f" {warning[:200]}", bold=True)]
    return elements


def argument_blocks(
    a: Approval, declared: Mapping[str, Any] | None, *, budget: int = CARD_VALUES_BUDGET
) -> list[dict[str, Any]]:
    """The arguments as they will run, one rich text block: each a name line and its boxed value (cut to its
    share of the card, saying so), then one "Show in full" button per cut value (all at once past five). Past
    :data:`MOST_ON_CARD` arguments, the card says how many more there are and opens them all. ``budget``: the
    characters of values shown in all (a list of cards shows less of each)."""
    args = a.execute_args
    props = (declared or {}).get("properties")
    specs: Mapping[str, Any] = props if isinstance(props, dict) else {}
    listed = list(args.items())[:MOST_ON_CARD]
    least = min(_LEAST_PER_VALUE, budget)
    share = max(least, min(_MOST_PER_VALUE, budget // max(len(listed), 1)))
    while True:  # the share shrinks until every name, warning and value fits the card's text
        elements, cut = _listed(listed, specs, share)
        if share <= least // 4 or sum(_chars(e) for e in elements) <= budget * 3 // 2:
            break
        share //= 2
    if len(args) > len(listed):
        more = f"…and {len(args) - len(listed)} more arguments, not shown here: show all of them in full below."
        elements.append({"type": "rich_text_section", "elements": [_text(more, bold=True)]})
    if not elements:
        elements.append({"type": "rich_text_section", "elements": [_text("(no arguments)", italic=True)]})
    blocks: list[dict[str, Any]] = [{"type": "rich_text", "block_id": f"hitl_args:{a.id}", "elements": elements}]
    if cut or len(args) > len(listed):
        if len(cut) > _MOST_BUTTONS or len(args) > len(listed):
            buttons = [full_value_button(a, ALL_ARGUMENTS, f"Show all {len(args)} arguments in full")]
        else:
            buttons = [
                full_value_button(a, i, f"Show {name[:30]} in full ({shown.length:,} characters)")
                for i, name, shown in cut
            ]
        blocks.append({"type": "actions", "block_id": f"hitl_full:{a.id}", "elements": buttons})
    return blocks


def _listed(
    listed: list[tuple[str, Any]], specs: Mapping[str, Any], share: int
) -> tuple[list[dict[str, Any]], list[tuple[int, str, Shown]]]:
    """The rich text elements of ``listed``, each value cut to ``share`` characters, and the values cut."""
    elements: list[dict[str, Any]] = []
    cut: list[tuple[int, str, Shown]] = []
    for i, (name, value) in enumerate(listed):
        spec = specs.get(name)
        shown = show(value, declared=spec if isinstance(spec, dict) else None)
        elements.append({"type": "rich_text_section", "elements": name_line(name, shown, spec or None)})
        start, covered = excerpt(value, share)
        elements.append({"type": "rich_text_preformatted", "elements": [_text(start or " ")], "border": 0})
        if start != shown.text:
            cut.append((i, name, shown))
            # One count everywhere: the value's own characters, as the "Show in full" button says it.
            note = f" Cut: the first {covered:,} of {shown.length:,} characters"
            elements.append({"type": "rich_text_section", "elements": [_emoji("scissors"), _text(note, italic=True)]})
    return elements, cut


def _chars(element: Mapping[str, Any]) -> int:
    return sum(len(run.get("text", "")) for run in element.get("elements", []))


def full_value_button(a: Approval, index: int, text: str) -> dict[str, Any]:
    """A button that opens one argument (or all of them) in full, bound to this version and action hash."""
    return {
        "type": "button",
        "action_id": f"{ACTION_FULL_VALUE}:{index}",
        "text": {"type": "plain_text", "text": text[:75]},
        "value": f"{a.id}|{a.version}|{a.action_hash}|{index}",
    }


def parse_full_value(value: str) -> tuple[str, int, str, int] | None:
    """``(approval id, version, action hash, argument index)`` of a "Show in full" button, or None."""
    head, sep, index = value.rpartition("|") if isinstance(value, str) else ("", "", "")
    parsed = parse_button_value(head) if sep else None
    digits = index.removeprefix("-")
    exact = digits.isascii() and digits.isdigit() and len(digits) <= 4 and str(int(digits)) == digits
    if parsed is None or not exact:
        return None
    return (*parsed, int(index))
