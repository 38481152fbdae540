"""Frozen dataclasses that are quick to make.

``@dataclass(frozen=True)`` writes each field through ``object.__setattr__``, about 0.1 µs a field: building a
:class:`~hitl.engine.domain.requests.ProposeRequest` (17 fields) cost more than the policy's verdict on an allowed
call. :func:`quick_init` gives such a class an ``__init__`` that fills the instance's ``__dict__`` in one step, with
the same signature, defaults, factories and ``__post_init__``. Everything else is the dataclass's own: assigning a
field still raises ``FrozenInstanceError``; equality, hashing, ``repr`` and ``dataclasses.replace`` are unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

__all__ = ["quick_init"]

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of the frozen dataclass ``cls`` (without slots) by one that writes ``__dict__`` at
    once. Apply it above ``@dataclass(frozen=True)``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"quick_init needs a frozen dataclass without slots, not {cls.__qualname__}")
    # The generated code is what dataclasses itself generates, with one write instead of one per field.
    scope: dict[str, Any] = {"_set": object.__setattr__, "_MISSING": dataclasses.MISSING}
    positional: list[str] = []
    keyword: list[str] = []
    factories: list[str] = []
    entries: list[str] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # checked above: a dataclass
        if not f.init:
            raise TypeError(f"quick_init does not handle init=False fields ({cls.__qualname__}.{f.name})")
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            param = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            param = f"{f.name}=_MISSING"
            factories.append(f"    if {f.name} is _MISSING:\n        {f.name} = _factory_{f.name}()")
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
        entries.append(f"{f.name!r}: {f.name}")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    body = [*factories, f"    _set(self, '__dict__', {{{', '.join(entries)}}})"]
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    exec(f"def __init__({signature}) -> None:\n" + "\n".join(body), scope)  # noqa: S102  # our own text
    init = scope["__init__"]
    original = cls.__init__  # read, to keep its signature for help() and inspect
    init.__qualname__, init.__module__, init.__doc__ = original.__qualname__, original.__module__, original.__doc__
    init.__annotations__ = dict(original.__annotations__)
    init.__signature__ = inspect.signature(original)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
