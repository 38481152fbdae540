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

from engine.domain.arg_schema import schema_errors, validate_args
from engine.errors import InvalidInput

__all__ = ["ArgSpec", "ToolSchema", "json_schema_of"]

from engine.domain.argspec import ArgSpec  # noqa: E402  (re-exported: schemas are written in it)

_TYPES: dict[str, type] = {"string": str, "number": float, "integer": int, "boolean": bool}


class ToolSchema:
    """Validates and normalises a tool's arguments (``extra`` arguments are refused)."""

    def __init__(
        self, tool: str, args: dict[str, ArgSpec], *, open_: bool = False, json_schema: dict[str, Any] | None = None
    ) -> None:
        self.tool = tool
        self.args = args
        self.open = open_
        self.json_schema = json_schema
        """Set when built from an approval's JSON Schema snapshot: validation is against exactly it."""
        fields: dict[str, Any] = {}
        for name, spec in args.items():
            fields[name] = (_annotation(spec), _field(spec))
        self._model = create_model(f"{tool}_args", __config__=ConfigDict(extra="forbid", strict=False), **fields)

    def validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Coerced arguments, or :class:`InvalidInput` naming every bad field."""
        if self.open:  # no schema declared (guarded plain functions): take the arguments as they are
            return dict(values)
        if self.json_schema is not None:
            return validate_args(self.tool, self.json_schema, self._coerced(values))
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

    @classmethod
    def from_json_schema(cls, tool: str, schema: dict[str, Any]) -> ToolSchema:
        """The form fields of a JSON Schema (for the Modify modal); validation stays with the schema itself."""
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        args = {str(name): _spec_of(p if isinstance(p, dict) else {}, name in required) for name, p in props.items()}
        return cls(tool, args, json_schema=schema)

    def _coerced(self, values: dict[str, Any]) -> dict[str, Any]:
        # Form inputs arrive as text: a number field's "60" is the number 60 before the schema judges it.
        out = dict(values)
        for name, value in values.items():
            spec = self.args.get(name)
            if spec is None or not isinstance(value, str):
                continue
            try:
                if spec.type == "integer" and value.strip().lstrip("-").isdigit():
                    out[name] = int(value)
                elif spec.type == "number":
                    number = float(value)
                    out[name] = int(number) if number.is_integer() and "." not in value else number
            except ValueError:
                pass  # left as text: the schema names the field
        return out

    def errors(self, values: dict[str, Any]) -> dict[str, str]:
        """Field -> message, empty when valid (for modal validation)."""
        if self.json_schema is not None and not self.open:
            return schema_errors(self.json_schema, self._coerced(values))
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


def json_schema_of(args: dict[str, ArgSpec]) -> dict[str, Any]:
    """The JSON Schema of a workflow tool's declared arguments (snapshotted on its approvals)."""
    props: dict[str, Any] = {}
    for name, spec in args.items():
        prop: dict[str, Any] = {"type": spec.type}
        if spec.enum:
            prop = {"type": "string", "enum": list(spec.enum)}
        if spec.description:
            prop["description"] = spec.description
        if spec.minimum is not None:
            prop["minimum"] = spec.minimum
        if spec.maximum is not None:
            prop["maximum"] = spec.maximum
        if spec.max_length is not None and spec.type == "string":
            prop["maxLength"] = spec.max_length
        if spec.default is not None:
            prop["default"] = spec.default
        if not spec.required:
            prop = {
                "anyOf": [prop, {"type": "null"}],
                **({"default": spec.default} if spec.default is not None else {}),
            }
        if spec.multiline:
            prop["x-multiline"] = True
        props[name] = prop
    required = [n for n, s in args.items() if s.required and s.default is None]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_SCALARS = ("string", "number", "integer", "boolean", "object", "array")


def _spec_of(prop: dict[str, Any], required: bool) -> ArgSpec:
    """One JSON Schema property as a form field (nullable unions and pydantic's anyOf read through)."""
    multiline = bool(prop.get("x-multiline"))
    for option in prop.get("anyOf") or prop.get("oneOf") or ():
        if isinstance(option, dict) and option.get("type") != "null":
            prop = {**option, **{k: v for k, v in prop.items() if k not in ("anyOf", "oneOf")}}
            break
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    enum = prop.get("enum")
    strings = isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum)
    max_length = prop.get("maxLength")
    return ArgSpec(
        type=kind if kind in _SCALARS else "string",
        description=str(prop.get("description") or prop.get("title") or "")[:300],
        required=required,
        default=prop.get("default"),
        minimum=prop.get("minimum") if isinstance(prop.get("minimum"), int | float) else None,
        maximum=prop.get("maximum") if isinstance(prop.get("maximum"), int | float) else None,
        max_length=max_length if isinstance(max_length, int) and 1 <= max_length <= 3000 else None,
        enum=[str(e) for e in enum] if strings and isinstance(enum, list) else None,
        multiline=multiline,
    )
