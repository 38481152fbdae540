"""What a refund will do, computed before a reviewer is asked and again just before it runs (``consequence:`` and
``consequence_check: true`` of ``refund`` in ``hitl.yaml``): the order's amount left to refund and the customer's
refunded balance, before -> after.

A consequence must not change anything. This one only reads, on a connection SQLite opens read-only
(``mode=ro``): a write through it fails instead of happening. hitl cannot check that a consequence has no effects
(it runs the author's code); what it does is run it bounded and, under ``hitl serve``, in a worker process with no
keys. Self-contained on purpose: it imports nothing beside it, so its module name (``shop_consequences``) is all
``hitl.yaml`` needs.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any


def read_only() -> sqlite3.Connection:
    """The shop's database (``SHOP_DB``, default ``.hitl/shop.db``) opened read-only: never created here.

    Under ``hitl serve`` this runs in a worker process that is given only the variables ``hitl.yaml`` names in
    ``consequence_limits.env`` (``SHOP_DB`` here; never a ``HITL_`` one) and starts in an empty folder of its own,
    so there ``SHOP_DB`` must be an absolute path."""
    path = Path(os.environ.get("SHOP_DB", ".hitl/shop.db")).resolve()
    return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)


def refund(args: dict[str, Any]) -> object:
    """The refund's consequence: what is left to refund on the order and what the customer has been refunded in all,
    before and after it."""
    order_id, amount = str(args["order_id"]), round(float(args["amount"]), 2)
    try:
        with closing(read_only()) as db:
            order = db.execute("SELECT customer_id, total, refunded FROM orders WHERE order_id = ?", (order_id,))
            row = order.fetchone()
            if row is None:
                return f"Order {order_id} does not exist: the refund will fail and nothing changes"
            customer, total, refunded = row
            (balance,) = db.execute(
                "SELECT COALESCE(SUM(refunded), 0) FROM orders WHERE customer_id = ?", (customer,)
            ).fetchone()
    except sqlite3.OperationalError:  # no database yet (no order was ever looked up): nothing to refund
        return "The shop has no database yet: the refund will fail and nothing changes"
    left = round(total - refunded, 2)
    if amount > left + 1e-9:
        return f"Refunding {amount:.2f} will fail: only {left:.2f} is left to refund on order {order_id}"
    return {
        "summary": f"Order {order_id} keeps {left - amount:.2f} of {total:.2f} refundable after this refund",
        "changes": {
            f"Left to refund on order {order_id}": {"before": left, "after": round(left - amount, 2)},
            f"Refunded to {customer} (all orders)": {"before": round(balance, 2), "after": round(balance + amount, 2)},
        },
    }
