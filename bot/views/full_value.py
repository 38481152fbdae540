"""One argument in full, in a modal a card's "Show in full" button opens: a value longer than the card holds is
read here, paged within Slack's modal limits (a page never splits a grapheme), each page bound to the approval's
version and action hash: if the approval changed since the card was drawn, the view says so instead of showing a
value that no longer runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hitl.bot.requests.button_values import parse_button_value
from hitl.bot.views.arguments import ALL_ARGUMENTS, name_line, value_at
from hitl.bot.views.escape import label
from hitl.engine.domain.display import pages, show
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval

__all__ = ["ACTION_PAGE", "PAGE_CHARS", "full_value_view", "page_value", "parse_page"]

PAGE_CHARS = 12_000
"""Characters of a value per page: four boxes of at most 3,000 (a modal holds 100 blocks and 250 kB; a page of
characters Slack sends as six bytes each still fits)."""
_BOX_CHARS = 3000
ACTION_PAGE = "hitl_value_page"
"""The action id (with ``:previous`` or ``:next``) of the view's page buttons."""


def page_value(approval_id: str, version: int, action_hash: str, index: int, page: int) -> str:
    """What a page button carries: the approval, version and hash the view is bound to, the argument, the page."""
    return f"{approval_id}|{version}|{action_hash}|{index}|{page}"


def parse_page(value: str) -> tuple[str, int, str, int, int] | None:
    """``(approval id, version, action hash, argument index, page)`` of a page button, or None."""
    rest, sep, page = value.rpartition("|") if isinstance(value, str) else ("", "", "")
    head, sep2, index = rest.rpartition("|")
    parsed = parse_button_value(head) if sep and sep2 else None
    numbers = (index, page)
    if parsed is None or not all(n.isascii() and n.lstrip("-").isdigit() and len(n) <= 6 for n in numbers):
        return None
    at, number = int(index), int(page)
    if number < 0:  # an index below ALL_ARGUMENTS is a decision's reason (reason_index)
        return None
    return (*parsed, at, number)


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def full_value_view(
    a: Approval,
    index: int,
    page: int,
    *,
    version: int,
    action_hash: str,
    declared: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The modal showing page ``page`` of argument ``index`` of ``a``, as of the ``version`` and ``action_hash``
    the card was drawn for; a view that says what changed when ``a`` is no longer that version."""
    view: dict[str, Any] = {"type": "modal", "title": _plain("Full value"), "close": _plain("Close")}
    if a.version != version or a.action_hash != action_hash:
        view["blocks"] = [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f":warning: This approval changed since its card was drawn (it is now version "
                    f"{a.version}, {label(str(a.status), 20)}). Close this and open the value from the card again.",
                },
            }
        ]
        return view
    found = value_at(a, index)
    if found is None:
        view["blocks"] = [_context(":warning: This argument is not in the approval.")]
        return view
    name, value = found
    shown = show(value)
    parts = pages(shown.text, PAGE_CHARS)
    page = min(max(page, 0), len(parts) - 1)
    props = (declared or {}).get("properties")
    found_spec = props.get(name) if isinstance(props, dict) and index != ALL_ARGUMENTS else None
    spec = found_spec if isinstance(found_spec, dict) else None
    boxes = [
        {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": box or " "}], "border": 0}
        for box in pages(parts[page], _BOX_CHARS)
    ]
    where = (
        f"`{label(a.tool, 60)}` · approval {a.id} v{a.version} · action hash {short_hash(a.action_hash)}\n"
        f"Page {page + 1} of {len(parts)} · {shown.length:,} characters in the value"
    )
    blocks: list[dict[str, Any]] = [
        _context(where),
        {
            "type": "rich_text",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": name_line(name, shown, spec if isinstance(spec, dict) else None),
                },
                *boxes,
            ],
        },
    ]
    buttons = []
    if page > 0:
        buttons.append(_page_button(a, index, page - 1, "previous", "Previous page"))
    if page < len(parts) - 1:
        buttons.append(_page_button(a, index, page + 1, "next", "Next page"))
    if buttons:
        blocks.append({"type": "actions", "block_id": "hitl_pages", "elements": buttons})
    view["blocks"] = blocks
    return view


def _page_button(a: Approval, index: int, page: int, which: str, text: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": f"{ACTION_PAGE}:{which}",
        "text": _plain(text),
        "value": page_value(a.id, a.version, a.action_hash, index, page),
    }
