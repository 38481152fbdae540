"""Every Slack request hitl handles, parsed once and strictly, before Bolt sees it.

A request is a form body holding either a slash command or a ``payload`` of JSON, or (the Events API) a JSON body.
Only the payload types hitl uses are accepted (``block_actions``, ``view_submission``, ``view_closed``; of events,
``app_home_opened`` and the URL check); the fields the listeners read must
have exactly their types; sizes and JSON nesting are bounded; text must be valid Unicode (no lone surrogates).
Anything else is refused with a short reason and changes nothing. Fields hitl does not read are allowed (Slack
adds fields over time) but still count toward the bounds.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import parse_qsl

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from yarl import URL

__all__ = [
    "MAX_DEPTH",
    "REQUEST",
    "Action",
    "Cell",
    "Command",
    "Event",
    "HomeOpened",
    "Interaction",
    "Parsed",
    "PayloadError",
    "SlackRequest",
    "ViewState",
    "command",
    "event",
    "interaction",
    "parse_request",
    "parsed_once",
    "read_body",
]

log = logging.getLogger(__name__)

MAX_DEPTH = 32
"""Deepest JSON nesting accepted (Slack's own payloads stay under 12)."""

Short = Annotated[str, StringConstraints(max_length=255)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


class PayloadError(ValueError):
    """The request is not one hitl can read; the message says which part, briefly (it goes to the log)."""


# Built at the first request, not at import (defer_build): every process that imports the bot paid for them.
class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, defer_build=True)


class User(_Open):
    """The Slack user who acted."""

    id: Id


class Action(_Open):
    """The button or control a person used."""

    action_id: Short
    block_id: Short | None = None
    value: Annotated[str, StringConstraints(max_length=2000)] | None = None


class Container(_Open):
    """Where the action happened (a message, an ephemeral message, a view)."""

    type: Short
    is_ephemeral: bool = False


class Option(_Open):
    """A selected option of a select input."""

    value: Annotated[str, StringConstraints(max_length=2000)] | None = None


class Cell(_Open):
    """One input's value in a submitted form (``view.state.values[block_id][action_id]``)."""

    type: Short | None = None
    value: Annotated[str, StringConstraints(max_length=20000)] | None = None
    selected_option: Option | None = None
    selected_options: list[Option] = Field(default_factory=list, max_length=100)

    def read(self) -> str | bool | None:
        """What the person entered: a select's chosen value, whether a checkbox is ticked, or the text."""
        if self.type == "static_select":
            return self.selected_option.value if self.selected_option else None
        if self.type == "checkboxes":
            return bool(self.selected_options)
        return self.value


class ViewState(_Open):
    """A submitted form's inputs, by block id and action id."""

    values: dict[Short, dict[Short, Cell]] = Field(default_factory=dict)


class Block(_Open):
    """One block of a message or view, as Slack sends it back."""

    type: Short
    block_id: Short | None = None


class View(_Open):
    """A modal view as submitted: its callback, signed private metadata and state."""

    callback_id: Short = ""
    private_metadata: Annotated[str, StringConstraints(max_length=3000)] = ""
    state: ViewState = Field(default_factory=ViewState)
    blocks: list[Block] = Field(default_factory=list, max_length=100)


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


class HomeOpened(_Open):
    """``app_home_opened``: someone opened the app's Home tab (or its Messages tab)."""

    type: Literal["app_home_opened"]
    user: Id
    tab: Short = "home"


class Event(_Open):
    """An Events API delivery: an event hitl subscribes to (``event_callback``), or Slack's URL check."""

    type: Literal["event_callback", "url_verification"]
    event: HomeOpened | None = None
    challenge: Annotated[str, StringConstraints(max_length=200)] | None = None


SlackRequest = Interaction | Command | Event
M = TypeVar("M", Interaction, Command, Event)

REQUEST = "hitl_request"
"""Where Bolt's context holds the request as parsed once (:func:`parsed_once`), for the listeners."""


def interaction(context: Mapping[str, Any]) -> Interaction:
    """The click or submission a listener is handling, as parsed once."""
    return _of(context, Interaction)


def command(context: Mapping[str, Any]) -> Command:
    """The slash command a listener is handling, as parsed once."""
    return _of(context, Command)


def event(context: Mapping[str, Any]) -> Event:
    """The Events API delivery a listener is handling, as parsed once."""
    return _of(context, Event)


def _of(context: Mapping[str, Any], model: type[M]) -> M:
    found = context.get(REQUEST)
    if not isinstance(found, model):  # only if a listener is registered for the wrong kind of request
        raise PayloadError(f"expected a {model.__name__}, got {type(found).__name__}")
    return found


async def parsed_once(
    req: AsyncBoltRequest,
    context: AsyncBoltContext,
    next: Callable[[], Awaitable[None]],  # noqa: A002 (Bolt's name)
) -> BoltResponse | None:
    """Bolt global middleware: the request as a model in ``context`` for the listeners. Over HTTP the server
    parsed and checked it already and hands it over; in Socket Mode Bolt's body is checked here the same way, and
    one that is not hitl's is refused before any listener runs."""
    if REQUEST not in context:
        try:
            context[REQUEST] = read_body(req.body)
        except PayloadError as exc:
            log.warning("refused an unreadable Slack request: %s", exc)
            return BoltResponse(status=400, body="unreadable payload")
    await next()
    return None


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
    if text.startswith("{"):  # the Events API posts JSON, not a form
        data = _json(text)
        return Parsed(data, _event(data))
    form = _form(text)
    if "payload" in form:
        data = _json(form["payload"])
        return Parsed(data, _interaction(data))
    if "command" in form:
        _no_surrogates(form)
        return Parsed(form, _validated(Command, form))
    raise PayloadError("neither a payload nor a command")


def read_body(body: dict[str, Any]) -> SlackRequest:
    """A request Bolt received already parsed (Socket Mode hands it over as a dict), with the same checks as
    :func:`parse_request`: a slash command's fields, or an interaction payload."""
    if "command" in body and "type" not in body:
        _no_surrogates(body)
        return _validated(Command, body)
    _check_depth(body)
    _no_surrogates(body)  # parsed by the standard library, which lets an escaped lone surrogate through
    if body.get("type") in ("event_callback", "url_verification"):
        return _event(body)
    return _interaction(body)


def _event(data: Any) -> Event:
    if not isinstance(data, dict):
        raise PayloadError("event body is not a JSON object")
    if data.get("type") == "event_callback":
        kind = data.get("event", {}).get("type") if isinstance(data.get("event"), dict) else None
        if kind != "app_home_opened":
            raise PayloadError(f"event type {str(kind)[:40]!r} is not one hitl subscribes to")
    elif data.get("type") != "url_verification":
        raise PayloadError(f"body type {str(data.get('type'))[:40]!r} is not one hitl handles")
    return _validated(Event, data)


def _interaction(data: Any) -> Interaction:
    if not isinstance(data, dict):
        raise PayloadError("payload is not a JSON object")
    if data.get("type") not in ("block_actions", "view_submission", "view_closed"):
        raise PayloadError(f"payload type {str(data.get('type'))[:40]!r} is not one hitl handles")
    if data["type"] == "block_actions" and not data.get("actions"):
        raise PayloadError("block_actions without actions")
    if data["type"] != "block_actions" and not isinstance(data.get("view"), dict):
        raise PayloadError(f"{data['type']} without a view")
    return _validated(Interaction, data)


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
    _check_depth(data)
    return data


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""What a JSON parser gives besides dicts and lists: told apart by type alone, without ``isinstance``."""


def _check_depth(value: Any) -> None:
    """Refuse a parsed value nesting deeper than :data:`MAX_DEPTH`, one level at a time, visiting only its
    containers (every click carries its card's blocks: ~100 containers, walked in ~20 µs)."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise PayloadError(f"payload nests deeper than {MAX_DEPTH} levels")
        below = []
        for node in level:
            for child in node.values() if isinstance(node, dict) else node:
                kind = type(child)
                if kind is dict or kind is list or (kind not in _SCALARS and isinstance(child, dict | list)):
                    below.append(child)
        level = below


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


def _validated(model: type[M], data: dict[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(payload)"
        raise PayloadError(f"{where}: {first['msg']}"[:200]) from None
