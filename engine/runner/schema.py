"""Argument schemas for tools: a small typed vocabulary, compiled to pydantic models.

The same schema validates workflow arguments, edited arguments from ``hitl resume --modify``, and the
Slack Modify modal (which builds its inputs from it)::

    schema:
      order_id: {type: string, max_length: 32}
      amount:   {type: number, minimum: 0.01, maximum: 10000}
      notify:   {type: boolean, default: true}
      reason:   {type: string, enum: [damaged, late, other]}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, create_model

from engine.errors import InvalidInput

__all__ = ["ArgSpec", "ToolSchema"]

from engine.domain.argspec import ArgSpec  # noqa: E402  (re-exported: schemas are written in it)

_TYPES: dict[str, type] = {"string": str, "number": float, "integer": int, "boolean": bool}


class ToolSchema:
    """Validates and normalises a tool's arguments (``extra`` arguments are refused)."""

    def __init__(self, tool: str, args: dict[str, ArgSpec], *, open_: bool = False) -> None:
        self.tool = tool
        self.args = args
        self.open = open_
        fields: dict[str, Any] = {}
        for name, spec in args.items():
            fields[name] = (_annotation(spec), _field(spec))
        self._model = create_model(f"{tool}_args", __config__=ConfigDict(extra="forbid", strict=False), **fields)

    def validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Coerced arguments, or :class:`InvalidInput` naming every bad field."""
        if self.open:  # no schema declared (guarded plain functions): take the arguments as they are
            return dict(values)
        try:
            model = self._model.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(args)'}: {e['msg']}" for e in exc.errors())
            raise InvalidInput(
                f"arguments for {self.tool} are invalid: {problems}",
                tool=self.tool,
                fields={".".join(str(p) for p in e["loc"]): e["msg"] for e in exc.errors()},
            ) from None
        return dict(model.model_dump())

    def errors(self, values: dict[str, Any]) -> dict[str, str]:
        """Field -> message, empty when valid (for modal validation)."""
        try:
            self.validate(values)
        except InvalidInput as exc:
            return dict(exc.context.get("fields", {}))
        return {}


def _annotation(spec: ArgSpec) -> Any:
    if spec.enum:
        base: Any = Literal[tuple(spec.enum)]
    elif spec.type == "object":
        base = dict[str, Any]
    elif spec.type == "array":
        base = list[Any]
    else:
        base = _TYPES[spec.type]
    return base if spec.required else base | None


def _field(spec: ArgSpec) -> Any:
    kw: dict[str, Any] = {"description": spec.description}
    if spec.minimum is not None:
        kw["ge"] = spec.minimum
    if spec.maximum is not None:
        kw["le"] = spec.maximum
    if spec.max_length is not None and spec.type == "string":
        kw["max_length"] = spec.max_length
    if spec.required and spec.default is None:
        return Field(**kw)
    return Field(default=spec.default, **kw)
