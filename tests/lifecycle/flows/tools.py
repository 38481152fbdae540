"""Tools for the same-decision-everywhere flows: each records its call in a JSON-lines ledger."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _record(name: str, **args: Any) -> dict[str, Any]:
    ledger = Path(os.environ["HITL_TEST_LEDGER"])
    with ledger.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": name, **args}) + "\n")
    return {"tool": name, **args}


def a(x: int) -> dict[str, Any]:
    return _record("a", x=x)


def b(amount: float) -> dict[str, Any]:
    return _record("b", amount=amount)
