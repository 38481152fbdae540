"""YAML loading that turns validation errors into ``file:line: field: problem`` messages."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from hitl.engine.errors import EngineError, ErrorCode

__all__ = [
    "Problem",
    "Tag",
    "compose",
    "field_text",
    "line_of",
    "load_data",
    "load_model",
    "parse_model",
    "place",
    "read_model",
]

M = TypeVar("M", bound=BaseModel)
_PLACE = re.compile(r"^([A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*)(?: \([^)]*\))?: ")
_PART = re.compile(r"\[\d+\]|[^.\[\]]+")
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose(text: str) -> Any:
    """The node tree of ``text`` (for line numbers), parsed by the same loader that read the data: the pure-Python
    parser refuses some plain scalars libyaml accepts (``prompt: go on?}`` in a flow mapping)."""
    return yaml.compose(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader


def load_data(text: str) -> Any:
    """The data of YAML ``text``, read by the loader every other function here uses (so it accepts the same files);
    raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader (the C one when libyaml is present)


def load_model(path: str | Path, model: type[M], *, code: ErrorCode, what: str) -> M:
    """Read ``path`` as YAML and validate it as ``model``; every failure is an :class:`EngineError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise EngineError(
            f"cannot read {what} {p}: {exc.strerror or exc}; check the path", code=code, path=str(p)
        ) from exc
    return parse_model(text, model, code=code, what=what, source=str(p))


Tag = Callable[[dict[str, Any]], str | None]
"""The tag pydantic puts in an error's location for a tagged union member (a step's kind, a pattern's type):
given the mapping, the tag it would have. Tags are not keys of the file, so they are left out of places."""


def place(data: Any, loc: tuple[Any, ...], tag: Tag | None) -> tuple[Any, ...]:
    """``loc`` without union tags: the path of keys and indexes as they are in the file."""
    out: list[Any] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and tag is not None and i < len(loc) - 1 and part == tag(node):
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def field_text(loc: tuple[Any, ...]) -> str:
    """``pattern.steps[2].tool``: how a place is named in messages."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_model(
    text: str, model: type[M], *, code: ErrorCode, what: str, source: str = "<string>", tag: Tag | None = None
) -> M:
    """YAML ``text`` validated as ``model``; a problem raises ``code`` naming ``what``, ``source`` and the line."""
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader (the C one when libyaml is present)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise EngineError(f"{source}{line}: {what} is not valid YAML: {problem}", code=code, source=source) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise EngineError(f"{source}:1: {what} must be a mapping at the top level", code=code, source=source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        node = compose(text)  # only on the error path: line numbers cost a parse
        first = _problem(data, node, exc.errors()[0], tag)
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise EngineError(
            f"{source}:{first.line}: {what} field '{first.field}': {first.message}{more}",
            code=code,
            source=source,
            line=first.line,
            field=first.field,
        ) from None


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file: where (line, dotted field) and what."""

    line: int
    field: str
    message: str


def read_model(
    text: str, model: type[M], *, context: dict[str, Any] | None = None, tag: Tag | None = None
) -> tuple[M | None, list[Problem]]:
    """Validate ``text`` as ``model`` and report every problem pydantic finds, each with its line (not only the
    first, as :func:`parse_model` does): the model, or None and the problems."""
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader (the C one when libyaml is present)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        return None, [Problem(mark.line + 1 if mark is not None else 1, "(file)", f"not valid YAML: {problem}")]
    if not isinstance(data, dict | None):
        return None, [Problem(1, "(top level)", "must be a mapping")]
    try:
        return model.model_validate(data or {}, context=context), []
    except ValidationError as exc:
        node = compose(text)
        return None, [_problem(data, node, error, tag) for error in exc.errors()]


def _problem(data: Any, node: Any, error: Any, tag: Tag | None) -> Problem:
    """One pydantic error as a problem at its place in the file (a union's tags left out)."""
    loc = place(data, tuple(error["loc"]), tag)
    message = str(error["msg"]).removeprefix("Value error, ")
    hint = _PLACE.match(message)
    if not loc and hint:  # a cross-field check names its place in the message: point at that line
        loc = tuple(int(p[1:-1]) if p.startswith("[") else p for p in _PART.findall(hint.group(1)))
        message = message[hint.end() :]
    return Problem(line_of(node, loc), field_text(loc), message)


def line_of(node: Any, loc: tuple[Any, ...]) -> int:
    """Best line for ``loc`` in a composed YAML node tree: the deepest part of the path that exists."""
    line = (node.start_mark.line + 1) if node is not None else 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if nxt is None:
                return line
            line = nxt[0].start_mark.line + 1
            node = nxt[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line
