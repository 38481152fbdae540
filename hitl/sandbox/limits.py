"""Slack's Block Kit limits, checked the way Slack checks them (see ../shared/SLACK_NOTES.md).

Used by the emulator to reject what Slack would reject, and by the bot's own tests. Each problem is a
string ``"<rule> [json-pointer:/path]"`` like the ``response_metadata.messages`` Slack returns.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MESSAGE_TEXT_BUDGET", "message_problems", "view_problems"]

MESSAGE_TEXT_BUDGET = 12_000
"""Slack answers ``msg_blocks_too_long`` for very long messages (seen near 13k characters)."""

_BLOCK_TYPES = {"header", "section", "divider", "context", "actions", "input", "image", "rich_text"}
_RICH_PARTS = {"rich_text_section", "rich_text_preformatted", "rich_text_quote", "rich_text_list"}


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.text_total = 0

    def bad(self, rule: str, path: str) -> None:
        self.problems.append(f"{rule} [json-pointer:{path}]")

    def text(self, obj: Any, path: str, *, max_len: int, plain_only: bool = False, min_len: int = 1) -> None:
        if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
            self.bad("must be a text object of type plain_text or mrkdwn", path)
            return
        if plain_only and obj["type"] != "plain_text":
            self.bad("must be a plain_text text object", f"{path}/type")
        value = obj.get("text")
        if not isinstance(value, str):
            self.bad("text is required and must be a string", f"{path}/text")
            return
        if len(value) < min_len:
            self.bad(f"must be at least {min_len} characters", f"{path}/text")
        if len(value) > max_len:
            self.bad(f"must be less than {max_len + 1} characters", f"{path}/text")
        self.text_total += len(value)

    def button(self, el: dict[str, Any], path: str) -> None:
        self.text(el.get("text"), f"{path}/text", max_len=75, plain_only=True)
        if not isinstance(el.get("action_id", ""), str) or len(el.get("action_id", "")) > 255:
            self.bad("action_id must be at most 255 characters", f"{path}/action_id")
        if len(str(el.get("value", ""))) > 2000:
            self.bad("must be less than 2001 characters", f"{path}/value")
        if el.get("style") not in (None, "primary", "danger"):
            self.bad("style must be primary or danger", f"{path}/style")
        confirm = el.get("confirm")
        if confirm is not None:
            self.text(confirm.get("title"), f"{path}/confirm/title", max_len=100, plain_only=True)
            self.text(confirm.get("text"), f"{path}/confirm/text", max_len=300)
            self.text(confirm.get("confirm"), f"{path}/confirm/confirm", max_len=30, plain_only=True)
            self.text(confirm.get("deny"), f"{path}/confirm/deny", max_len=30, plain_only=True)

    def rich_text(self, elements: Any, path: str) -> None:
        """A rich text block's elements: sections, preformatted boxes, quotes and lists of typed inline elements
        (text, emoji, link, user); every text counts toward the message's total, and none may be empty."""
        if not isinstance(elements, list) or not elements:
            self.bad("must provide at least 1 element", f"{path}/elements")
            return
        for i, part in enumerate(elements):
            where = f"{path}/elements/{i}"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in _RICH_PARTS:
                self.bad("must be a rich_text_section, _preformatted, _quote or _list", f"{where}/type")
                continue
            inner = part.get("elements")
            if kind == "rich_text_list":
                self.rich_text(inner, where)
                continue
            if not isinstance(inner, list) or not inner:
                self.bad("must provide at least 1 element", f"{where}/elements")
                continue
            for j, run in enumerate(inner):
                self.rich_run(run, f"{where}/elements/{j}")

    def rich_run(self, run: Any, path: str) -> None:
        kind = run.get("type") if isinstance(run, dict) else None
        if kind == "text":
            text = run.get("text")
            if not isinstance(text, str) or not text:
                self.bad("text must be a non-empty string", f"{path}/text")
                return
            self.text_total += len(text)
            style = run.get("style", {})
            if not isinstance(style, dict) or set(style) - {"bold", "italic", "strike", "code"}:
                self.bad("style may only set bold, italic, strike and code", f"{path}/style")
        elif kind == "emoji":
            if not isinstance(run.get("name"), str) or not run["name"]:
                self.bad("emoji needs a name", f"{path}/name")
        elif kind == "link":  # Slack refuses a link element without its address
            if not isinstance(run.get("url"), str) or not run["url"]:
                self.bad("link needs a url", f"{path}/url")
        elif kind not in ("user", "channel", "usergroup", "broadcast", "date"):
            self.bad(f"unsupported rich text element {kind!r}", f"{path}/type")

    def element(self, el: Any, path: str) -> None:
        if not isinstance(el, dict):
            self.bad("must be an object", path)
            return
        kind = el.get("type")
        if kind == "button":
            self.button(el, path)
        elif kind == "plain_text_input":
            max_length = el.get("max_length", 3000)
            if not isinstance(max_length, int) or not 1 <= max_length <= 3000:
                self.bad("max_length must be between 1 and 3000", f"{path}/max_length")
            if len(str(el.get("initial_value", ""))) > (max_length if isinstance(max_length, int) else 3000):
                self.bad("initial_value must not be longer than max_length", f"{path}/initial_value")
        elif kind == "number_input":
            if not isinstance(el.get("is_decimal_allowed"), bool):
                self.bad("is_decimal_allowed is required", f"{path}/is_decimal_allowed")
        elif kind in ("static_select", "checkboxes", "radio_buttons"):
            options = el.get("options")
            top = 10 if kind == "checkboxes" else 100
            if not isinstance(options, list) or not 1 <= len(options) <= top:
                self.bad(f"must have between 1 and {top} options", f"{path}/options")
                return
            for i, opt in enumerate(options):
                self.text(opt.get("text"), f"{path}/options/{i}/text", max_len=75)
                if not isinstance(opt.get("value"), str) or len(opt["value"]) > 150:
                    self.bad("option value must be at most 150 characters", f"{path}/options/{i}/value")
        elif kind not in ("image", "mrkdwn", "plain_text", "overflow", "datepicker"):
            self.bad(f"unsupported element type {kind!r}", f"{path}/type")

    def block(self, b: Any, i: int, base: str, ids: set[str]) -> None:
        path = f"{base}/{i}"
        if not isinstance(b, dict) or b.get("type") not in _BLOCK_TYPES:
            self.bad("must be a valid block type", f"{path}/type")
            return
        block_id = b.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or len(block_id) > 255:
                self.bad("block_id must be at most 255 characters", f"{path}/block_id")
            elif block_id in ids:
                self.bad("block_id must be unique", f"{path}/block_id")
            ids.add(str(block_id))
        kind = b["type"]
        if kind == "header":
            self.text(b.get("text"), f"{path}/text", max_len=150, plain_only=True)
        elif kind == "section":
            if "text" not in b and "fields" not in b:
                self.bad("must provide text or fields", path)
            if "text" in b:
                self.text(b["text"], f"{path}/text", max_len=3000)
            fields = b.get("fields", [])
            if len(fields) > 10:
                self.bad("must have at most 10 fields", f"{path}/fields")
            for j, f in enumerate(fields):
                self.text(f, f"{path}/fields/{j}", max_len=2000)
            if "accessory" in b:
                self.element(b["accessory"], f"{path}/accessory")
        elif kind == "context":
            elements = b.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 10:
                self.bad("must have between 1 and 10 elements", f"{path}/elements")
                return
            for j, el in enumerate(elements):
                if isinstance(el, dict) and el.get("type") in ("mrkdwn", "plain_text"):
                    self.text(el, f"{path}/elements/{j}", max_len=3000)
        elif kind == "actions":
            elements = b.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
                self.bad("must have between 1 and 25 elements", f"{path}/elements")
                return
            action_ids = [el.get("action_id") for el in elements if isinstance(el, dict)]
            if len(action_ids) != len(set(action_ids)):
                self.bad("action_id must be unique within a block", f"{path}/elements")
            for j, el in enumerate(elements):
                self.element(el, f"{path}/elements/{j}")
        elif kind == "rich_text":
            self.rich_text(b.get("elements"), path)
        elif kind == "input":
            self.text(b.get("label"), f"{path}/label", max_len=2000, plain_only=True)
            if "hint" in b:
                self.text(b["hint"], f"{path}/hint", max_len=2000, plain_only=True)
            self.element(b.get("element"), f"{path}/element")


def _blocks(blocks: Any, limit: int, checker: _Checker) -> None:
    if not isinstance(blocks, list):
        checker.bad("blocks must be an array", "/blocks")
        return
    if len(blocks) > limit:
        checker.bad(f"must have at most {limit} blocks", "/blocks")
    ids: set[str] = set()
    for i, b in enumerate(blocks):
        checker.block(b, i, "/blocks", ids)


def message_problems(blocks: Any) -> tuple[str | None, list[str]]:
    """``(error, problems)``: ``invalid_blocks`` or ``msg_blocks_too_long`` as Slack would answer, or None."""
    checker = _Checker()
    _blocks(blocks, 50, checker)
    if checker.problems:
        return "invalid_blocks", checker.problems
    if checker.text_total > MESSAGE_TEXT_BUDGET:
        return "msg_blocks_too_long", [f"blocks hold {checker.text_total} characters of text"]
    return None, []


def view_problems(view: Any) -> list[str]:
    """Problems with a modal view (``views.open``/``views.update``)."""
    checker = _Checker()
    if not isinstance(view, dict) or view.get("type") != "modal":
        return ["view type must be modal [json-pointer:/view/type]"]
    checker.text(view.get("title"), "/view/title", max_len=24, plain_only=True)
    for key in ("submit", "close"):
        if key in view:
            checker.text(view[key], f"/view/{key}", max_len=24, plain_only=True)
    if not isinstance(view.get("blocks"), list) or not view["blocks"]:
        checker.bad("must have at least 1 block", "/view/blocks")
    else:
        _blocks(view["blocks"], 100, checker)
    if len(str(view.get("private_metadata", ""))) > 3000:
        checker.bad("must be less than 3001 characters", "/view/private_metadata")
    if len(str(view.get("callback_id", ""))) > 255:
        checker.bad("must be less than 256 characters", "/view/callback_id")
    if len(json.dumps(view)) > 250_000:
        checker.bad("view is larger than 250 kB", "/view")
    return checker.problems


def home_problems(view: Any) -> list[str]:
    """Problems with a Home tab view (``views.publish``)."""
    checker = _Checker()
    if not isinstance(view, dict) or view.get("type") != "home":
        return ["view type must be home [json-pointer:/view/type]"]
    if not isinstance(view.get("blocks"), list):
        checker.bad("must provide an array", "/view/blocks")
    else:
        _blocks(view["blocks"], 100, checker)
    if len(str(view.get("private_metadata", ""))) > 3000:
        checker.bad("must be less than 3001 characters", "/view/private_metadata")
    if len(json.dumps(view)) > 250_000:
        checker.bad("view is larger than 250 kB", "/view")
    return checker.problems
