"""JSON Schema for tool arguments: the one schema language hitl speaks.

Every agent framework already describes its tools in JSON Schema (Strands tool specs, LangChain ``args_schema``,
OpenAI Agents ``params_json_schema``, Pydantic AI tool definitions, MCP ``inputSchema``). An approval stores a
snapshot of its tool's schema when it is created, so edited arguments are validated against exactly what the
reviewer saw, on every surface, without importing the user's code.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from engine.errors import InvalidInput

__all__ = ["MAX_SCHEMA_BYTES", "check_schema", "schema_errors", "validate_args"]

MAX_SCHEMA_BYTES = 64 * 1024
"""A schema bigger than this is refused: it is stored on every approval of its tool."""


def check_schema(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a valid JSON Schema for an object of arguments, else :class:`InvalidInput`."""
    if not isinstance(schema, dict):
        raise InvalidInput(f"the argument schema of {tool} must be a JSON object", tool=tool)
    try:
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise InvalidInput(f"the argument schema of {tool} is not JSON", tool=tool) from None
    size = len(canonical)
    if size > MAX_SCHEMA_BYTES:
        raise InvalidInput(
            f"the argument schema of {tool} is {size} bytes; at most {MAX_SCHEMA_BYTES} are stored", tool=tool
        )
    if schema.get("type", "object") != "object":
        raise InvalidInput(f"the argument schema of {tool} must describe an object (type: object)", tool=tool)
    problem = _meta_problem(canonical)
    if problem is not None:
        raise InvalidInput(f"the argument schema of {tool} is not valid JSON Schema: {problem}", tool=tool)
    return schema


@functools.lru_cache(maxsize=1024)
def _meta_problem(canonical: str) -> str | None:
    # Checking a schema against the meta-schema costs ~0.6 ms; a tool's schema is the same on every call.
    try:
        Draft202012Validator.check_schema(json.loads(canonical))
    except SchemaError as exc:
        return str(exc.message)
    return None


def schema_errors(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, str]:
    """Field -> message for every violation (empty when ``args`` is valid). ``(args)`` names the whole object."""
    problems: dict[str, str] = {}
    for err in sorted(Draft202012Validator(schema).iter_errors(args), key=lambda e: list(map(str, e.path))):
        where = ".".join(str(p) for p in err.absolute_path)
        if not where and err.validator == "required":
            missing = [str(name) for name in err.validator_value if name not in args]
            for name in missing:
                problems.setdefault(name, "required")
            continue
        if not where and err.validator == "additionalProperties":
            allowed = set((schema.get("properties") or {}).keys())
            for name in args:
                if name not in allowed:
                    problems.setdefault(str(name), "not an argument of this tool")
            continue
        problems.setdefault(where or "(args)", err.message[:200])
    return problems


def validate_args(tool: str, schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """``args`` when they satisfy ``schema``, else :class:`InvalidInput` naming every bad field."""
    problems = schema_errors(schema, args)
    if problems:
        listed = "; ".join(f"{k}: {v}" for k, v in problems.items())
        raise InvalidInput(f"arguments for {tool} are invalid: {listed}", tool=tool, fields=problems)
    return args
