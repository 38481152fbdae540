from __future__ import annotations

import enum
import hashlib
import json
import math
import re
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hitl.engine.domain.hashing import MAX_EXACT_INT, action_hash, batch_hash, canonical_json, identical, normalize
from hitl.engine.errors import InvalidInput

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_EXACT_INT, MAX_EXACT_INT)
    | st.text(max_size=20)
    | st.floats(min_value=-MAX_EXACT_INT, max_value=MAX_EXACT_INT, allow_nan=False)
)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
args_strategy = st.dictionaries(st.text(max_size=10), json_values, max_size=6)


def test_matches_the_documented_contract() -> None:
    args = {"order_id": "78291", "amount": 899, "note": "Grüße"}
    doc = json.dumps({"tool": "refund", "args": args}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert action_hash("refund", args) == hashlib.sha256(doc.encode()).hexdigest()


def test_integral_floats_hash_like_integers() -> None:
    assert action_hash("refund", {"amount": 899}) == action_hash("refund", {"amount": 899.0})
    assert action_hash("refund", {"amount": 899.5}) != action_hash("refund", {"amount": 899})
    assert action_hash("refund", {"amount": True}) != action_hash("refund", {"amount": 1})
    assert canonical_json({"a": -0.0, "b": 1e15, "c": 0.1}) == '{"a":0,"b":1000000000000000,"c":0.1}'


@pytest.mark.parametrize("beyond", [MAX_EXACT_INT + 1, -MAX_EXACT_INT - 1, 2**70, 1e20, -9.1e15])
def test_a_number_beyond_what_json_carries_exactly_is_refused(beyond: float) -> None:
    with pytest.raises(InvalidInput, match=str(MAX_EXACT_INT)):
        canonical_json({"n": [beyond]})
    assert (
        canonical_json({"n": MAX_EXACT_INT, "m": -float(MAX_EXACT_INT)})
        == f'{{"m":-{MAX_EXACT_INT},"n":{MAX_EXACT_INT}}}'
    )


@pytest.mark.parametrize(("written", "said"), [(1e21, "1e+21, a whole number"), (1e16, "1e+16, a whole number")])
def test_a_whole_number_written_with_an_exponent_is_refused_as_written(written: float, said: str) -> None:
    # Not "an integer of 22 digits": the caller wrote 1e21, and the refusal says what it read.
    with pytest.raises(InvalidInput, match=re.escape(f"args.n is {said}")):
        canonical_json({"n": written})


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "x"}, {"x": object()}, {"x": b"bytes"}, {"x": {1, 2}}])
def test_unhashable_values_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        action_hash("t", {"v": bad})


@given(args_strategy)
def test_key_order_never_matters(args: dict[str, Any]) -> None:
    reordered = dict(reversed(list(args.items())))
    assert action_hash("t", args) == action_hash("t", reordered)


@given(args_strategy)
def test_hash_survives_a_json_round_trip(args: dict[str, Any]) -> None:
    # What a store or a Slack button round-trips through JSON must hash the same.
    assert action_hash("t", json.loads(json.dumps(args))) == action_hash("t", args)


@given(args_strategy, args_strategy)
def test_different_actions_differ(a: dict[str, Any], b: dict[str, Any]) -> None:
    if canonical_json(a) != canonical_json(b):
        assert action_hash("t", a) != action_hash("t", b)
    assert action_hash("t", a) != action_hash("u", a)


# Few, look-alike values (1, 1.0, True, "1", -0.0, 0...) so pairs often collide: where Python's == and the
# canonical JSON disagree is exactly what ``identical`` must get right.
look_alikes = st.recursive(
    st.sampled_from([0, 0.0, -0.0, 1, 1.0, True, False, None, "1", "", 1.5]),
    lambda kids: st.lists(kids, max_size=2) | st.dictionaries(st.sampled_from("ab"), kids, max_size=2),
    max_leaves=4,
)


@given(look_alikes, look_alikes)
def test_identical_means_the_same_canonical_json(a: Any, b: Any) -> None:
    assert identical(normalize(a), normalize(b)) is (canonical_json(a) == canonical_json(b))


@given(st.text(min_size=1, max_size=30))
def test_unicode_is_hashed_as_utf8_not_escaped(text: str) -> None:
    assert text in canonical_json({"v": text}) or "\\" in json.dumps(text, ensure_ascii=False)


def test_batch_hash_binds_order_and_membership() -> None:
    items = [("email", {"to": "a"}), ("email", {"to": "b"})]
    assert batch_hash(items) != batch_hash(list(reversed(items)))
    assert batch_hash(items) != batch_hash([*items, ("email", {"to": "c"})])
    assert batch_hash(items) == batch_hash([("email", {"to": "a"}), ("email", {"to": "b"})])


@given(args_strategy)
def test_plain_dicts_and_other_mappings_normalize_alike(args: dict[str, Any]) -> None:
    # Plain dicts (nearly every call) take a path by exact type; any other mapping the general one: same result.
    plain = normalize(args)
    assert normalize(MappingProxyType(args)) == plain and normalize(OrderedDict(args)) == plain
    assert type(normalize(MappingProxyType(args))) is dict


def test_subclasses_of_json_scalars_become_the_plain_types() -> None:
    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    out = normalize({"level": Level.HIGH, "name": Name("x"), "flag": True, "n": 7})
    assert out == {"level": 3, "name": "x", "flag": True, "n": 7}
    assert type(out["level"]) is int and out["flag"] is True
