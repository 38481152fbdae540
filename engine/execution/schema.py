"""A workflow tool's argument schema: JSON Schema, declared in the workflow or derived from the function.

Without ``schema:`` in the workflow, the schema comes from the function's signature through pydantic, so
constraints are written where the code is::

    def refund(order_id: Annotated[str, Field(max_length=32)],
               amount: Annotated[float, Field(gt=0, le=10_000, description="Amount to refund")],
               reason: str = "", *, idempotency_key: str) -> dict: ...

or declared as JSON Schema in the workflow (it wins over the signature)::

    schema:
      type: object
      properties:
        order_id: {type: string, maxLength: 32}
        amount: {type: number, exclusiveMinimum: 0, maximum: 10000}
      required: [order_id, amount]

The same schema validates rendered workflow arguments, is snapshotted on every approval of the tool, and is what
edits are checked against on every surface (the Slack Modify form is built from the snapshot).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict, create_model
from pydantic.errors import PydanticUserError

from hitl.engine.domain.arg_schema import coerce_text, compile_schema, schema_errors, validate_args, with_defaults
from hitl.engine.errors import InvalidInput

__all__ = ["HITL_PARAMETERS", "ToolSchema", "signature_schema"]

HITL_PARAMETERS = frozenset({"idempotency_key", "receipt"})
"""Parameters hitl fills in when it calls a tool, never the caller's arguments: the execution's idempotency key, and
its signed receipt."""


class ToolSchema:
    """Validates and normalises a tool's arguments against its JSON Schema (``None``: taken as they are)."""

    def __init__(self, tool: str, json_schema: dict[str, Any] | None) -> None:
        self.tool = tool
        self._compiled = compile_schema(tool, json_schema) if json_schema is not None else None
        self.json = json_schema if self._compiled is not None else None

    def validate(self, values: dict[str, Any]) -> dict[str, Any]:
        """Arguments with text coerced to the declared scalar types and top-level defaults filled in, or
        :class:`InvalidInput` naming every bad field."""
        if self.json is None:  # guarded plain functions without a schema
            return dict(values)
        assert self._compiled is not None
        args = with_defaults(self.json, coerce_text(self.json, values, self._compiled.kinds))
        return validate_args(self.tool, self.json, args, self._compiled)

    def errors(self, values: dict[str, Any]) -> dict[str, str]:
        """Field -> message, empty when valid."""
        if self.json is None:
            return {}
        return schema_errors(self.json, with_defaults(self.json, coerce_text(self.json, values)), self._compiled)


def signature_schema(tool: str, fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of ``fn``'s keyword arguments (pydantic; ``Annotated[..., Field(...)]`` constraints kept).

    ``idempotency_key`` and ``receipt`` are hitl's, not the caller's, and are left out; ``**kwargs`` allows extra
    arguments.
    Raises :class:`InvalidInput` when the signature cannot be described (declare ``schema:`` then).
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
        params = inspect.signature(fn).parameters
    except (NameError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"cannot read the signature of tool {tool} ({exc}); declare its arguments under schema: in the workflow",
            tool=tool,
        ) from None
    fields: dict[str, Any] = {}
    extra = False
    for p in params.values():
        if p.name in HITL_PARAMETERS or p.kind is p.VAR_POSITIONAL:
            continue
        if p.kind is p.VAR_KEYWORD:
            extra = True
            continue
        if p.kind is p.POSITIONAL_ONLY:
            raise InvalidInput(
                f"tool {tool}: argument {p.name} is positional-only; hitl calls tools with keyword arguments",
                tool=tool,
            )
        fields[p.name] = (hints.get(p.name, Any), ... if p.default is p.empty else p.default)
    try:
        model = create_model(f"{tool}_args", __config__=ConfigDict(extra="allow" if extra else "forbid"), **fields)
        schema = model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"cannot derive a JSON Schema for tool {tool} from its signature ({str(exc).splitlines()[0]}); "
            "declare its arguments under schema: in the workflow",
            tool=tool,
        ) from None
    schema.pop("title", None)
    if not extra:
        schema["additionalProperties"] = False
    return schema
