"""How deep a JSON text nests, measured on its bytes: as deep as a parser nests it, brackets inside strings (escaped
quotes and backslashes included) not counted, in linear time at any depth."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from hitl.engine.domain.nesting import nesting


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        (b"", 0),
        (b"5", 0),
        (b'"[[{"', 0),
        (b"[]", 1),
        (b'{"a": [1, {"b": "[[[["}]}', 3),
        (b'["\\"[[["]', 1),  # an escaped quote does not end the string
        (b'["\\\\", []]', 2),  # an escaped backslash does not escape the quote after it
        (b'["\\\\\\"]"]', 1),
        (b'["unterminated [[[', 1),  # what a string never closes hides nothing a parser would reach
        (b"]]][", 0),
        (b"[" * 100_000, 100_000),
        (b'{"":' * 100_000 + b"1" + b"}" * 100_000, 100_000),
    ],
)
def test_a_text_nests_as_deep_as_its_containers(text: bytes, levels: int) -> None:
    assert nesting(text) == levels


def test_the_measure_is_the_parsers_on_random_documents() -> None:
    rng = random.Random(61)
    for _ in range(2000):
        value: Any = rng.choice([None, "x", 1.5])
        for _ in range(rng.randrange(40)):
            value = rng.choice(
                [[value], {'k\\"[': value}, ["x\\", value, '"{[', {}], {"a": "]]]\\\\", "b": [value]}, {"é[": value}]
            )
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        assert nesting(text) == _depth(value), text
