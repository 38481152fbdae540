"""Every Slack request hitl handles, parsed once and strictly, before Bolt sees it.

A request is a form body holding either a slash command or a ``payload`` of JSON. Only the payload types hitl
uses are accepted (``block_actions``, ``view_submission``, ``view_closed``); the fields the listeners read must
have exactly their types; sizes and JSON nesting are bounded; text must be valid Unicode (no lone surrogates).
Anything else is refused with a short reason and changes nothing. Fields hitl does not read are allowed (Slack
adds fields over time) but still count toward the bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from yarl import URL

__all__ = ["Command", "Interaction", "Parsed", "PayloadError", "SlackRequest", "parse_request"]

MAX_DEPTH = 32
"""Deepest JSON nesting accepted (Slack's own payloads stay under 12)."""

Short = Annotated[str, StringConstraints(max_length=255)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


class PayloadError(ValueError):
    """The request is not one hitl can read; the message says which part, briefly (it goes to the log)."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class User(_Open):
    id: Id


class Action(_Open):
    action_id: Short
    block_id: Short | None = None
    value: Annotated[str, StringConstraints(max_length=2000)] | None = None


class Container(_Open):
    type: Short
    is_ephemeral: bool = False


class ViewState(_Open):
    values: dict[Short, dict[Short, dict[Short, Any]]] = Field(default_factory=dict)


class View(_Open):
    callback_id: Short = ""
    private_metadata: Annotated[str, StringConstraints(max_length=3000)] = ""
    state: ViewState = Field(default_factory=ViewState)


class Interaction(_Open):
    """A button click or a modal submission."""

    type: Literal["block_actions", "view_submission", "view_closed"]
    user: User
    actions: list[Action] = Field(default_factory=list, max_length=5)
    container: Container | None = None
    view: View | None = None
    trigger_id: Short | None = None
    response_url: Annotated[str, StringConstraints(max_length=500)] | None = None


class Command(_Open):
    """A ``/hitl`` slash command."""

    command: Short
    user_id: Id
    text: Annotated[str, StringConstraints(max_length=4000)] = ""
    trigger_id: Short | None = None
    response_url: Annotated[str, StringConstraints(max_length=500)] | None = None


SlackRequest = Interaction | Command


@dataclass(frozen=True, slots=True)
class Parsed:
    """A request read once: ``body`` is what Bolt dispatches on (the payload object, or the command's form fields,
    as Bolt's own parser would give them) and ``request`` the same, validated."""

    body: dict[str, Any]
    request: SlackRequest


def parse_request(body: bytes) -> Parsed:
    """The request in ``body``, or :class:`PayloadError` naming what is wrong.

    This runs on every click, so it uses C parsers: yarl's unquoter for the form (urllib's is pure Python, ~0.6 ms
    for a 20 KB card payload against ~5 µs) and orjson for the JSON (which also refuses lone surrogates and
    nesting past 1,024 levels before :data:`MAX_DEPTH` is checked on the parsed value).
    """
    try:
        text = body.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise PayloadError("body is not UTF-8") from None
    form = _form(text)
    if "payload" in form:
        data = _json(form["payload"])
        if not isinstance(data, dict):
            raise PayloadError("payload is not a JSON object")
        if data.get("type") not in ("block_actions", "view_submission", "view_closed"):
            raise PayloadError(f"payload type {str(data.get('type'))[:40]!r} is not one hitl handles")
        if data["type"] == "block_actions" and not data.get("actions"):
            raise PayloadError("block_actions without actions")
        if data["type"] != "block_actions" and not isinstance(data.get("view"), dict):
            raise PayloadError(f"{data['type']} without a view")
        return Parsed(data, _validated(Interaction, data))
    if "command" in form:
        _no_surrogates(form)
        return Parsed(form, _validated(Command, form))
    raise PayloadError("neither a payload nor a command")


def _form(text: str) -> dict[str, str]:
    if "%" not in text or "=" not in text:
        return _strict_form(text)
    # yarl turns an escape that is not UTF-8 into U+FFFD where urllib's strict mode refuses it: a body showing
    # U+FFFD is read again strictly (and refused when it is not a form). Anything else both read alike.
    form = dict(URL(f"http://slack/?{text}", encoded=True).query)
    if any("\ufffd" in v for v in form.values()):
        return _strict_form(text)
    return form


def _strict_form(text: str) -> dict[str, str]:
    try:
        return dict(parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), errors="strict"))
    except (ValueError, UnicodeDecodeError):
        raise PayloadError("body is not a form") from None


def _json(text: str) -> Any:
    if text.startswith("\ufeff"):
        raise PayloadError("payload starts with a byte-order mark")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise PayloadError("payload is not valid JSON") from None
    if _depth(data) > MAX_DEPTH:
        raise PayloadError(f"payload nests deeper than {MAX_DEPTH} levels")
    return data


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar is 0), visiting only its containers."""
    deepest = 0
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest


def _no_surrogates(value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise PayloadError("text holds a lone surrogate") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_surrogates(k)
            _no_surrogates(v)
    elif isinstance(value, list):
        for v in value:
            _no_surrogates(v)


def _validated(model: type[Interaction] | type[Command], data: dict[str, Any]) -> SlackRequest:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(payload)"
        raise PayloadError(f"{where}: {first['msg']}"[:200]) from None
