"""Identifiers drawn alike: a practice twin's session and call id have its real approval's form (its words and
separators, a number where it has one, the alphabet of its random parts), are drawn at random each time, and are
never the real ones."""

from __future__ import annotations

import re

import pytest

from hitl.engine.domain.ids import alike

ALIKE = [
    ("chat-42", r"chat-\d\d"),
    ("call-0", r"call-\d"),
    ("s1", r"s\d"),
    ("riley-private-7", r"riley-private-\d"),
    ("ses_7KQ2M9XW3A", r"ses_[0-9A-HJKMNP-TV-Z]{10}"),  # a session hitl made: its Crockford alphabet
    ("550e8400-e29b-41d4-a716-446655440000", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    ("toolu_01XFDUDYJgAACzvnptvVoYEL", r"toolu_[0-9A-Za-z]{24}"),
    ("s-real", r"s-[a-z]{4}"),  # words only: the last is drawn anew
    ("Chat 7 für Riley", r"Chat \d für Riley"),
]


@pytest.mark.parametrize(("real", "shape"), ALIKE)
def test_a_value_drawn_alike_has_the_form_of_the_real_one_and_is_never_it(real: str, shape: str) -> None:
    drawn = {alike(real) for _ in range(50)}
    assert real not in drawn
    assert len(drawn) > 1  # drawn, not derived
    for value in drawn:
        assert re.fullmatch(shape, value), value
        assert len(value) == len(real)
        classes = [(c.isdigit(), c.islower(), c.isupper(), c.isalnum()) for c in value]
        assert classes == [(c.isdigit(), c.islower(), c.isupper(), c.isalnum()) for c in real], value


def test_a_value_with_no_letters_or_digits_to_draw_gets_a_random_one_as_long() -> None:
    drawn = alike("会话")
    assert drawn != "会话" and len(drawn) == 8
