"""YAML loading that turns validation errors into ``file:line: field: problem`` messages."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from engine.errors import EngineError, ErrorCode

__all__ = ["load_model", "parse_model"]

M = TypeVar("M", bound=BaseModel)
_PLACE = re.compile(r"^([A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*)(?: \([^)]*\))?: ")
_PART = re.compile(r"\[\d+\]|[^.\[\]]+")
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def parse_model(text: str, model: type[M], *, code: ErrorCode, what: str, source: str = "<string>") -> M:
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
        node = yaml.compose(text, Loader=yaml.SafeLoader)  # only on the error path: line numbers cost a parse
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        hint = _PLACE.match(msg)
        if not loc and hint:  # a cross-field check names its place in the message: point at that line
            loc = tuple(int(p[1:-1]) if p.startswith("[") else p for p in _PART.findall(hint.group(1)))
            msg = msg[hint.end() :]
        field = ".".join(str(p) for p in loc) or "(top level)"
        lineno = _line_of(node, loc)
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise EngineError(
            f"{source}:{lineno}: {what} field '{field}': {msg}{more}",
            code=code,
            source=source,
            line=lineno,
            field=field,
        ) from None


def _line_of(node: Any, loc: tuple[Any, ...]) -> int:
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
