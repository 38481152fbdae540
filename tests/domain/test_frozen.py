"""quick_init: a frozen dataclass made in one step behaves exactly as the dataclass would."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from hitl.engine.domain.frozen import quick_init


@quick_init
@dataclass(frozen=True)
class Sample:
    name: str
    count: int = 1
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", kw_only=True)


@dataclass(frozen=True)
class Plain:
    name: str
    count: int = 1
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", kw_only=True)


def test_it_makes_what_the_dataclass_makes() -> None:
    for args, kwargs in [(("a",), {}), (("a", 2, ["x"]), {"note": "n"}), ((), {"name": "b", "count": 3})]:
        made, plain = Sample(*args, **kwargs), Plain(*args, **kwargs)  # type: ignore[arg-type]
        assert dataclasses.asdict(made) == dataclasses.asdict(plain)
    assert Sample("a") == Sample("a") and Sample("a") != Sample("a", 2)
    assert Sample("a").tags is not Sample("a").tags  # a factory is called for each instance
    assert repr(Sample("a", note="n")) == "Sample(name='a', count=1, tags=[], note='n')"
    assert dataclasses.replace(Sample("a"), count=5) == Sample("a", 5)


def test_it_stays_frozen_and_keeps_its_signature() -> None:
    made = Sample("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 2  # type: ignore[misc]
    assert str(inspect.signature(Sample)) == str(inspect.signature(Plain))
    with pytest.raises(TypeError):
        Sample("a", 1, [], "positional note")  # type: ignore[call-arg]  # kw_only stays keyword-only
    with pytest.raises(TypeError):
        Sample()  # type: ignore[call-arg]


def test_post_init_runs_and_other_classes_are_refused() -> None:
    @quick_init
    @dataclass(frozen=True)
    class Checked:
        amount: int

        def __post_init__(self) -> None:
            if self.amount < 0:
                raise ValueError("negative")

    assert Checked(1).amount == 1
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)
    with pytest.raises(TypeError, match="frozen dataclass"):
        quick_init(dataclass(frozen=True, slots=True)(type("Slotted", (), {"__annotations__": {"name": "str"}})))
    with pytest.raises(TypeError, match="frozen dataclass"):

        @quick_init
        @dataclass
        class Mutable:
            name: str
