"""Where a consequence comes from: a ``module:function`` named in ``hitl.yaml``, imported when the file is loaded (a
bad reference is a config error naming the tool), or a callable given beside the tool in Python."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from hitl.engine.domain.policy_spec import PolicySpec
from hitl.engine.errors import PolicyError

__all__ = ["ConsequenceFn", "Source", "check_consequences", "resolve"]

ConsequenceFn = Callable[[dict[str, Any]], object]
"""A consequence: a copy of the validated arguments in, a sentence or a mapping with a ``summary`` out."""
Source = ConsequenceFn | str
"""A consequence to run: a callable in this process, or the ``module:function`` a worker process imports."""


def resolve(ref: str, *, tool: str) -> ConsequenceFn:
    """The callable ``ref`` (``module:function``) names; :class:`PolicyError` naming ``tool`` and what to fix."""
    module, _, name = ref.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise PolicyError(
            f"tool {tool!r}: consequence {ref!r} cannot be imported ({exc}); install the module or put its folder on "
            "PYTHONPATH"
        ) from None
    except AttributeError:
        raise PolicyError(f"tool {tool!r}: consequence {ref!r}: module {module!r} has no {name!r}") from None
    if not callable(found):
        raise PolicyError(f"tool {tool!r}: consequence {ref!r} is a {type(found).__name__}, not a function")
    fn: ConsequenceFn = found
    return fn


def check_consequences(policy: PolicySpec) -> Mapping[str, ConsequenceFn]:
    """Import every tool's consequence now, so a bad reference stops the process before it serves anyone."""
    return {tool: resolve(spec.consequence, tool=tool) for tool, spec in policy.tools.items() if spec.consequence}
