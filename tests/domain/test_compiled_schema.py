"""Compiled argument schemas: the native validator judges exactly as the reference one on every keyword it is given,
is never given a keyword where they could differ, and a schema is compiled once but never served stale."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitl.engine.domain.arg_schema import compile_schema, validate_args
from hitl.engine.errors import InvalidInput

NAMES = ("a", "b", "c")

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)  # a Python caller's tuple: a JSON array to both validators
        | st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    ),
    max_leaves=8,
)
numbers = st.integers(min_value=-5, max_value=5) | st.floats(min_value=-5, max_value=5, allow_nan=False)
counts = st.integers(min_value=0, max_value=4)


def _constraints(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for keyword, values in (
        ("minimum", numbers),
        ("maximum", numbers),
        ("exclusiveMinimum", numbers),
        ("exclusiveMaximum", numbers),
        ("minLength", counts),
        ("maxLength", counts),
        ("minItems", counts),
        ("maxItems", counts),
        ("minProperties", counts),
        ("maxProperties", counts),
        ("uniqueItems", st.booleans()),
        ("enum", st.lists(json_values, min_size=1, max_size=3)),
        ("const", json_values),
        ("format", st.sampled_from(["date-time", "email", "uri"])),
        ("description", st.text(max_size=5)),
    ):
        if draw(st.integers(0, 5)) == 0:
            out[keyword] = draw(values)
    return out


@st.composite
def schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """A schema built of the keywords the native validator is trusted with."""
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object", "any"]))
    node: dict[str, Any] = {} if kind == "any" else {"type": kind}
    node.update(_constraints(draw))
    if depth < 2:
        if kind == "object" or draw(st.integers(0, 4)) == 0:
            props = draw(st.dictionaries(st.sampled_from(NAMES), schemas(depth + 1), max_size=3))
            node["properties"] = props
            node["required"] = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=2))
            node["additionalProperties"] = draw(st.booleans() | schemas(depth + 1))
        if kind == "array" or draw(st.integers(0, 5)) == 0:
            node["items"] = draw(schemas(depth + 1))
        if draw(st.integers(0, 4)) == 0:
            key = draw(st.sampled_from(["anyOf", "allOf", "oneOf"]))
            node[key] = draw(st.lists(schemas(depth + 1), min_size=1, max_size=3))
        if draw(st.integers(0, 6)) == 0:
            node["not"] = draw(schemas(depth + 1))
    return node


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(schema=schemas(), value=json_values)
def test_the_native_validator_agrees_with_the_reference(schema: dict[str, Any], value: Any) -> None:
    root = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    compiled = compile_schema("t", root)
    assert compiled.fast is not None  # every keyword drawn is trusted to it
    args = {"x": value}
    assert compiled.fast.is_valid(args) == compiled.checker.is_valid(args), (root, args)
    assert compiled.is_valid(args) == compiled.checker.is_valid(args)


@pytest.mark.parametrize(
    "value",
    [datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), {1, 2}, b"bytes", object(), decimal.Decimal("1.5")],
    ids=["datetime", "set", "bytes", "object", "decimal"],
)
@pytest.mark.parametrize("kind", ["string", "number", "array", "object"])
def test_values_json_has_no_type_for_are_judged_by_the_reference_without_raising(value: Any, kind: str) -> None:
    compiled = compile_schema("t", {"type": "object", "properties": {"x": {"type": kind}}})
    assert compiled.fast is not None
    expected = compiled.checker.is_valid({"x": value})
    assert compiled.is_valid({"x": value}) == expected
    assert expected == (kind == "number" and isinstance(value, decimal.Decimal))  # a Decimal is a number
    if expected:
        assert validate_args("t", compiled.schema, {"x": value}, compiled) == {"x": value}
    else:
        with pytest.raises(InvalidInput, match="arguments for t are invalid: x:"):
            validate_args("t", compiled.schema, {"x": value}, compiled)


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "pattern": "^[0-9]+$"},  # regular-expression dialects differ (\\d, lookarounds)
        {"type": "number", "multipleOf": 0.1},  # float arithmetic differs
        {"$ref": "https://example.com/schema.json"},  # a reference outside the schema would read the network
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "string", "unknownKeyword": 1},
    ],
)
def test_keywords_where_the_two_could_differ_go_to_the_reference_alone(prop: dict[str, Any]) -> None:
    compiled = compile_schema("t", {"type": "object", "properties": {"x": prop}})
    assert compiled.fast is None
    assert compiled.checker is not None


def test_extension_keywords_and_argument_names_that_look_like_keywords_stay_fast() -> None:
    schema = {
        "type": "object",
        "properties": {"pattern": {"type": "string", "x-multiline": True}, "$ref": {"type": "integer"}},
        "$defs": {"pattern": {"type": "string"}},
    }
    assert compile_schema("t", schema).fast is not None


def test_a_schema_is_compiled_once_and_a_changed_one_again() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}
    first = compile_schema("t", schema)
    assert compile_schema("t", schema) is first
    assert compile_schema("t", dict(schema)) is first  # an equal schema shares the compiled one
    assert validate_args("t", schema, {"n": 5}, first) == {"n": 5}
    schema["properties"]["n"]["maximum"] = 3  # the caller changes its dict in place
    again = compile_schema("t", schema)
    assert again is not first
    with pytest.raises(InvalidInput) as exc:
        validate_args("t", schema, {"n": 5}, again)
    assert exc.value.context["fields"] == {"n": "5 is greater than the maximum of 3"}


def test_invalid_schemas_are_refused_every_time() -> None:
    bad = {"type": "object", "properties": {"n": {"type": "money"}}}
    for _ in range(2):
        with pytest.raises(InvalidInput, match="not valid JSON Schema"):
            compile_schema("refund", bad)
