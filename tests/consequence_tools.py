"""Consequences the tests name in hitl.yaml (``tests.consequence_tools:refund``): what a refund will do, and, asked
by the refund's ``reason``, a consequence that sleeps past its bound, reads its environment, or misbehaves."""

from __future__ import annotations

import os
import time
from typing import Any

RAN: list[dict[str, Any]] = []
"""The arguments each consequence run in this process was given (a worker process's are its own)."""


def refund(args: dict[str, Any]) -> object:
    """The refund's remaining balance after it, or, by ``reason``: ``sleep`` (60 s), ``environ`` (the names of its
    environment variables), ``mutate`` (changes its arguments), ``wrong`` (returns an int)."""
    RAN.append(dict(args))
    reason = args.get("reason", "")
    if reason == "sleep":
        time.sleep(60)
    if reason == "environ":
        return {"summary": "environment", "table": [{"name": name} for name in sorted(os.environ)]}
    if reason == "mutate":
        args["amount"] = 0
        args["order_id"] = "changed"
    if reason == "wrong":
        return 42
    if reason == "print":
        print("noise on stdout that is not the protocol")  # noqa: T201
    amount = float(args["amount"])
    return {
        "summary": f"Order {args['order_id']} keeps {200 - amount:.2f} refundable",
        "changes": {"refundable": {"before": 200.0, "after": 200 - amount}},
        "table": [{"order": args["order_id"], "refund": amount}],
        "diff": "- balance 200.00\n+ balance " + f"{200 - amount:.2f}",
    }


def hostile(args: dict[str, Any]) -> object:
    """Returns its ``note`` argument in every part of a consequence (for the hostile corpus)."""
    note = args["note"]
    return {
        "summary": note,
        "changes": {note[:50]: {"before": note, "after": [note]}},
        "table": [{note[:50]: note}],
        "diff": note,
    }


def pay(args: dict[str, Any]) -> object:
    """What a payment will do: who gets how much."""
    return {"summary": f"Pays {float(args['amount']):.2f} to {args['to']}", "changes": {"paid": [0, args["amount"]]}}
