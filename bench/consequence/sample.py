"""The consequence the consequence benchmark's refund declares: what an author would write (read the arguments,
compute, return a sentence with a before -> after change and a row), with nothing slow in it, so the figures are
what hitl adds around a consequence rather than the consequence's own work."""

from __future__ import annotations

from typing import Any


def refund(args: dict[str, Any]) -> object:
    """The order's refundable amount after the refund."""
    amount = float(args["amount"])
    return {
        "summary": f"Order {args['order_id']} keeps {200 - amount:.2f} refundable",
        "changes": {"refundable": {"before": 200.0, "after": 200 - amount}},
        "table": [{"order": args["order_id"], "refund": amount}],
    }
