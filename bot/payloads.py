"""Shapes of the Slack requests hitl handles, checked with pydantic (extra fields allowed: Slack adds them)."""

from __future__ import annotations

import json
from typing import Any, Literal
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["well_formed"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _User(_Open):
    id: str = Field(min_length=1, max_length=64)


class _Action(_Open):
    action_id: str = Field(min_length=1, max_length=255)


class _BlockActions(_Open):
    type: Literal["block_actions"]
    user: _User
    actions: list[_Action] = Field(min_length=1)


class _View(_Open):
    type: str
    callback_id: str = ""
    private_metadata: str = ""
    state: dict[str, Any] = Field(default_factory=dict)


class _ViewSubmission(_Open):
    type: Literal["view_submission", "view_closed"]
    user: _User
    view: _View


class _Command(_Open):
    command: str
    user_id: str = Field(min_length=1)
    text: str = ""


def well_formed(body: bytes) -> bool:
    """Whether a form-encoded Slack request has the shape its type requires."""
    try:
        form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}
    except UnicodeDecodeError:
        return False
    if "payload" in form:
        try:
            data = json.loads(form["payload"])
        except json.JSONDecodeError:
            return False
        if not isinstance(data, dict):
            return False
        model: type[BaseModel] = _ViewSubmission if str(data.get("type", "")).startswith("view_") else _BlockActions
        if data.get("type") not in ("block_actions", "view_submission", "view_closed"):
            return True  # not ours: Bolt answers it (or says it is unhandled)
        try:
            model.model_validate(data)
        except ValidationError:
            return False
        return True
    if "command" in form:
        try:
            _Command.model_validate(form)
        except ValidationError:
            return False
    return True
