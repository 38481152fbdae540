"""JSON Schema for tool arguments: the one schema language hitl speaks.

Every agent framework already describes its tools in JSON Schema (Strands tool specs, LangChain ``args_schema``,
OpenAI Agents ``params_json_schema``, Pydantic AI tool definitions, MCP ``inputSchema``). An approval stores a
snapshot of its tool's schema when it is created, so edited arguments are validated against exactly what the
reviewer saw, on every surface, without importing the user's code.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from hitl.engine.domain.hashing import check_exact, exact_int
from hitl.engine.errors import InvalidInput

__all__ = [
    "MAX_SCHEMA_BYTES",
    "ArgField",
    "CompiledSchema",
    "check_schema",
    "compile_schema",
    "coerce_text",
    "declared_schema",
    "fields_of",
    "json_number",
    "reference_checker",
    "sample_args",
    "schema_errors",
    "validate_args",
    "with_defaults",
]

MAX_SCHEMA_BYTES = 64 * 1024
"""A schema bigger than this is refused: it is stored on every approval of its tool."""


@dataclass(frozen=True, eq=False, slots=True)
class CompiledSchema:
    """A checked argument schema and what judges arguments against it, built once per distinct schema.

    ``checker`` (the ``jsonschema`` reference implementation) names every bad field; ``fast`` (``jsonschema_rs``,
    compiled to native code: ~0.1 µs a call instead of ~5) only answers valid or not, and exists only for schemas
    whose every keyword both implement alike (see :data:`FAST_KEYWORDS`). Arguments are valid when ``fast`` says
    so (the common case); otherwise the reference decides, and names why it refuses.
    """

    schema: dict[str, Any]
    canonical: str
    """The schema as sorted, compact JSON: its identity, and what its size is measured on."""
    checker: Any
    """The reference validator (:func:`reference_checker`'s)."""
    fast: Any = None
    kinds: dict[str, str] = field(default_factory=dict)
    """Each top-level argument's kind (see :func:`fields_of`), read once for :func:`coerce_text`."""

    def is_valid(self, args: Any) -> bool:
        """Whether ``args`` satisfy the schema (without collecting errors)."""
        if self.fast is not None:
            try:
                if self.fast.is_valid(args):
                    return True
            except (ValueError, TypeError, OverflowError):
                pass  # a value JSON has no type for (a datetime, a set, bytes): the reference judges it
        # Every refusal is the reference's: it alone knows Python's numbers (a Decimal is a number to it).
        return bool(self.checker.is_valid(args))


FAST_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
        "maxItems", "uniqueItems", "minProperties", "maxProperties", "anyOf", "allOf", "oneOf", "not", "$defs",
        "$ref", "title", "description", "default", "examples", "format", "readOnly", "writeOnly", "deprecated",
        "$schema", "$comment",
    }
)  # fmt: skip
"""Keywords the native validator may judge: both implementations pass the JSON Schema test suite on them, and none
of them reads the network or differs by regular-expression dialect (``pattern``) or float arithmetic
(``multipleOf``). ``format`` is an annotation in draft 2020-12 for both (not asserted). A schema with any other
keyword, or a ``$ref`` outside itself, is judged by ``jsonschema`` alone."""


@functools.cache
def reference_checker() -> Any:
    """The reference validator's class: draft 2020-12, with a Python tuple taken for a JSON array, as the native
    validator and JSON encoding take it (a caller in Python may pass one). Built, and ``jsonschema`` imported, when
    the first schema is compiled: a command whose ``hitl.yaml`` declares none (a listing, a halt) never pays for it
    (some 40 ms of CPU)."""
    from jsonschema import Draft202012Validator, validators

    array = Draft202012Validator.TYPE_CHECKER.redefine("array", lambda _, value: isinstance(value, list | tuple))
    return validators.extend(Draft202012Validator, type_checker=array)


def compile_schema(tool: str, schema: dict[str, Any]) -> CompiledSchema:
    """``schema`` checked (a JSON Schema for an object of arguments, within :data:`MAX_SCHEMA_BYTES`) and compiled,
    else :class:`InvalidInput`. The same schema object asked again is answered from memory while it is unchanged:
    a framework sends its tool's schema dict with every call."""
    seen = _COMPILED_BY_ID.get(id(schema))
    if seen is not None and seen[0] is schema and seen[1] == schema:
        return seen[2]
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
    compiled = _compiled(canonical)
    if isinstance(compiled, str):
        raise InvalidInput(f"the argument schema of {tool} is not valid JSON Schema: {compiled}", tool=tool)
    if len(_COMPILED_BY_ID) >= 1024:
        _COMPILED_BY_ID.clear()
    # The entry holds the schema object itself, so its id cannot be reused by another object while remembered; a
    # deep copy to compare with catches a dict changed in place.
    _COMPILED_BY_ID[id(schema)] = (schema, json.loads(canonical), compiled)
    return compiled


_COMPILED_BY_ID: dict[int, tuple[dict[str, Any], dict[str, Any], CompiledSchema]] = {}


@functools.lru_cache(maxsize=1024)
def _compiled(canonical: str) -> CompiledSchema | str:
    """The compiled schema, or what makes it invalid JSON Schema (checking that costs ~0.6 ms: done once)."""
    import jsonschema_rs  # with the reference validator: see reference_checker
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    schema = json.loads(canonical)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return str(exc.message)
    fast = None
    if _fast_safe(schema):
        try:
            fast = jsonschema_rs.Draft202012Validator(schema, offline=True)
        except (ValueError, jsonschema_rs.ReferencingError):  # anything it cannot compile: the reference judges
            fast = None
    kinds = {f.name: f.kind for f in fields_of(schema)}
    return CompiledSchema(
        schema=schema, canonical=canonical, checker=reference_checker()(schema), fast=fast, kinds=kinds
    )


def _fast_safe(node: Any, *, keywords: bool = True) -> bool:
    """Every keyword in ``node`` is one of :data:`FAST_KEYWORDS` (``x-`` extensions are ignored by both) and every
    ``$ref`` points inside the schema."""
    if isinstance(node, list):
        return all(_fast_safe(item) for item in node)
    if not isinstance(node, dict):
        return True
    for key, value in node.items():
        if not keywords:  # the names under properties / $defs are argument names, not keywords
            if not _fast_safe(value):
                return False
            continue
        if key.startswith("x-"):
            continue
        if key not in FAST_KEYWORDS or (key == "$ref" and not (isinstance(value, str) and value.startswith("#"))):
            return False
        if key in ("enum", "const", "default", "examples"):
            continue  # values, not schemas
        if not _fast_safe(value, keywords=key not in ("properties", "$defs")):
            return False
    return True


def check_schema(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` if it is a valid JSON Schema for an object of arguments, else :class:`InvalidInput`."""
    compile_schema(tool, schema)
    return schema


def declared_schema(schema: Any) -> dict[str, Any]:
    """A schema written in a config file, checked (pydantic validators raise ``ValueError`` with what to fix).

    The per-argument form of hitl 0.x (``order_id: {type: string, max_length: 32}``) reads as a valid but
    meaningless JSON Schema, so ``type: object`` is required to tell the two apart.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(
            "schema must be a JSON Schema object: `type: object` with the arguments under `properties:` and the "
            "required ones listed under `required:` (the per-argument form `name: {type: ..., max_length: ...}` "
            "was replaced by JSON Schema: write maxLength, and x-multiline: true for long text)"
        )
    try:
        return check_schema("this tool", schema)
    except InvalidInput as exc:
        raise ValueError(exc.message) from None


def schema_errors(
    schema: dict[str, Any], args: dict[str, Any], validator: CompiledSchema | None = None
) -> dict[str, str]:
    """Field -> message for every violation (empty when ``args`` is valid). ``(args)`` names the whole object.
    ``validator``: ``schema`` compiled before (building a validator costs more than most validations)."""
    problems: dict[str, str] = {}
    checker = validator.checker if validator is not None else reference_checker()(schema)
    for err in sorted(checker.iter_errors(args), key=lambda e: list(map(str, e.path))):
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


def validate_args(
    tool: str, schema: dict[str, Any], args: dict[str, Any], validator: CompiledSchema | None = None
) -> dict[str, Any]:
    """``args`` when they satisfy ``schema``, else :class:`InvalidInput` naming every bad field. ``validator``:
    ``schema`` compiled before (compiled here otherwise)."""
    compiled = validator if validator is not None else compile_schema(tool, schema)
    if compiled.is_valid(args):  # the common case, without collecting errors
        return args
    # A refusal the reference cannot name a field for still refuses: fail closed.
    problems = schema_errors(schema, args, compiled) or {"(args)": "do not satisfy the tool's schema"}
    listed = "; ".join(f"{k}: {v}" for k, v in problems.items())
    raise InvalidInput(f"arguments for {tool} are invalid: {listed}", tool=tool, fields=problems)


_KINDS = ("string", "number", "integer", "boolean", "object", "array")


@dataclass(frozen=True)
class ArgField:
    """One top-level argument of a schema, read for building a form (the schema itself stays the judge)."""

    name: str
    kind: str
    """string, number, integer, boolean, object or array (anything else reads as string)."""
    required: bool
    description: str = ""
    default: Any = None
    enum: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None
    multiline: bool = False
    """``x-multiline: true`` in the schema, or a string longer than 300 characters."""


def fields_of(schema: dict[str, Any]) -> list[ArgField]:
    """The top-level arguments of ``schema`` in declaration order (nullable unions and local ``$ref`` read through)."""
    required = set(schema.get("required") or ())
    props = schema.get("properties") or {}
    return [_field(schema, str(name), p, name in required) for name, p in props.items() if isinstance(p, dict)]


def _resolved(root: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    for _ in range(8):  # a bounded walk: a schema may reference itself
        ref = prop.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            break
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            break
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    for option in prop.get("anyOf") or prop.get("oneOf") or ():
        if isinstance(option, dict) and option.get("type") != "null":
            merged = {k: v for k, v in prop.items() if k not in ("anyOf", "oneOf")}
            return {**_resolved(root, option), **merged}
    return prop


def _field(root: dict[str, Any], name: str, prop: dict[str, Any], required: bool) -> ArgField:
    prop = _resolved(root, prop)
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    enum = prop.get("enum")
    strings = isinstance(enum, list) and bool(enum) and all(isinstance(e, str) for e in enum)
    max_length = prop.get("maxLength")
    max_length = max_length if isinstance(max_length, int) and max_length >= 1 else None
    low = prop.get("minimum", prop.get("exclusiveMinimum"))
    high = prop.get("maximum", prop.get("exclusiveMaximum"))
    return ArgField(
        name=name,
        kind=kind if kind in _KINDS else "string",
        required=required,
        description=str(prop.get("description") or "")[:300],
        default=prop.get("default"),
        enum=tuple(enum) if strings and isinstance(enum, list) else None,
        minimum=low if isinstance(low, int | float) and not isinstance(low, bool) else None,
        maximum=high if isinstance(high, int | float) and not isinstance(high, bool) else None,
        max_length=max_length,
        multiline=bool(prop.get("x-multiline")) or (max_length is not None and max_length > 300),
    )


def coerce_text(schema: dict[str, Any], values: dict[str, Any], kinds: dict[str, str] | None = None) -> dict[str, Any]:
    """``values`` with text given for a number, integer or boolean argument converted to it.

    Form inputs and rendered templates arrive as text: ``"60"`` for a number is the number 60 before the schema
    judges it. Text that does not convert is left alone, so the schema names the field. ``kinds``: the schema's
    argument kinds read before (:attr:`CompiledSchema.kinds`).
    """
    if kinds is None:
        kinds = {f.name: f.kind for f in fields_of(schema)}
    out = dict(values)
    for name, value in values.items():
        kind = kinds.get(name)
        if not isinstance(value, str) or kind not in ("integer", "number", "boolean"):
            continue
        if kind == "boolean":
            text = value.strip().lower()
            if text in ("true", "false"):
                out[name] = text == "true"
            continue
        number = json_number(value)
        if number is not None:
            out[name] = number
    return out


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", re.ASCII)


def json_number(text: str) -> int | float | None:
    """``text`` read by the JSON number grammar and nothing else (ASCII digits, an optional minus, a fraction, an
    exponent: no spaces, underscores, other scripts' digits, ``inf`` or ``nan``): an int when it has neither
    fraction nor exponent, else a float; None when it is not such a number. A number beyond what JSON carries
    exactly (:data:`~hitl.engine.domain.hashing.MAX_EXACT_INT`) is :class:`InvalidInput`, as everywhere."""
    if not _JSON_NUMBER.fullmatch(text):
        return None
    if text.lstrip("-").isdigit():
        return exact_int(text)
    number = float(text)
    if not math.isfinite(number):
        return None
    if number.is_integer():
        check_exact(int(number), "the number")
    return number


def with_defaults(schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with each missing top-level argument that declares a ``default`` set to it, so the approval
    shows (and the tool receives) every value that will be used."""
    out = dict(values)
    for name, prop in (schema.get("properties") or {}).items():
        # A null default is the function's own "not given": left out, the function applies it.
        if name not in out and isinstance(prop, dict) and prop.get("default") is not None:
            out[name] = prop["default"]
    return out


def sample_args(schema: dict[str, Any], *, full: bool) -> dict[str, Any]:
    """Arguments of the shape ``schema`` allows, for checking what is computed from them (policy conditions):
    only the required ones, or every declared one (``full``). Each value is its default, its first enum member, or
    the smallest value of its type the bounds allow."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return {
        name: _sample(_resolved(schema, prop) if isinstance(prop, dict) else {})
        for name, prop in props.items()
        if full or name in required
    }


def _sample(prop: dict[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    if prop.get("enum"):
        return prop["enum"][0]
    if "const" in prop:
        return prop["const"]
    kind = prop.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind in ("number", "integer"):
        low = prop.get("minimum", prop.get("exclusiveMinimum", 0))
        value = low + 1 if "exclusiveMinimum" in prop else low
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return sample_args(prop, full=False)
    return "x" * int(prop.get("minLength", 1))
