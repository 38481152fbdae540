"""The worker process a ``hitl serve`` consequence runs in (started by :mod:`.workers`, with ``python -I``).

Standard library only, and nothing of hitl: it holds no key and no token, and its environment is the allow-list its
parent gave it. One request a line on stdin (``{"path": [...], "ref": "module:function", "args": {...}}``), one
answer a line on the protocol's own descriptor (``{"value": ...}`` or ``{"failed": "why"}``); whatever the
consequence prints goes nowhere. It ends when stdin closes.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any


def _answer(request: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    ref = str(request.get("ref", ""))
    if ref not in found:
        module, _, name = ref.partition(":")
        found[ref] = getattr(importlib.import_module(module), name)
    try:
        value = found[ref](request.get("args"))
    except BaseException as exc:  # the author's code: whatever it raises is a failed consequence
        return {"failed": f"raised {type(exc).__name__}: {str(exc)[:200]}"}
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return {"failed": f"returned {type(value).__name__} holding a value that is not JSON"}
    return {"value": value}


def main() -> None:
    """Answer requests until stdin closes."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # the consequence's own prints never reach the protocol
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    found: dict[str, Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        sys.path[:] = [p for p in request.get("path", []) if isinstance(p, str)]
        try:
            answer = _answer(request, found)
        except Exception as exc:  # the reference no longer imports
            answer = {"failed": f"cannot import {request.get('ref')!r}: {exc}"}
        answers.write(json.dumps(answer, ensure_ascii=False) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
