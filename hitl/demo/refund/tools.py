"""Tools of the order-support agent, with real side effects in a local SQLite shop database.

The database (``SHOP_DB``, default ``.hitl/shop.db`` in the working directory) is created and seeded
on first use. Effects deduplicate on the idempotency key hitl passes them, the way a payment API does, so a
recovered execution never refunds twice.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

SEED = [
    ("78291", "C-1042", "Dana Whitfield", "dana@example.com", 1299.00),
    ("78292", "C-1042", "Dana Whitfield", "dana@example.com", 49.00),
    ("78300", "C-2001", "Sam Okafor", "sam@example.com", 75.50),
    ("78310", "C-3107", "Lee Marsh", "lee@example.com", 64.00),  # the sandbox's chat agent refunds these two
    ("78311", "C-3107", "Lee Marsh", "lee@example.com", 38.00),
]


def shop_path() -> Path:
    """Where the example shop's database is (``SHOP_DB``)."""
    return Path(os.environ.get("SHOP_DB", ".hitl/shop.db"))


def connect() -> sqlite3.Connection:
    """A connection to the example shop's database, made with its sample orders if new."""
    path = shop_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    conn.executescript(
        """
        CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, customer_id TEXT, customer_name TEXT,
            email TEXT, total REAL, refunded REAL NOT NULL DEFAULT 0);
        CREATE TABLE IF NOT EXISTS refunds (refund_id INTEGER PRIMARY KEY, order_id TEXT, amount REAL,
            reason TEXT, idempotency_key TEXT UNIQUE);
        CREATE TABLE IF NOT EXISTS emails (email_id INTEGER PRIMARY KEY, recipient TEXT, subject TEXT, body TEXT,
            idempotency_key TEXT UNIQUE);
        """
    )
    conn.executemany(
        "INSERT OR IGNORE INTO orders (order_id, customer_id, customer_name, email, total) VALUES (?, ?, ?, ?, ?)", SEED
    )
    conn.commit()
    return conn


def look_up_order(order_id: str) -> dict[str, Any]:
    """Read an order from the shop (a read: safe to repeat)."""
    with closing(connect()) as db:
        row = db.execute(
            "SELECT order_id, customer_id, customer_name, email, total, refunded FROM orders WHERE order_id = ?",
            (order_id,),
        ).fetchone()
    if row is None:
        raise LookupError(f"no order {order_id}")
    keys = ("order_id", "customer_id", "customer_name", "email", "total", "refunded")
    return dict(zip(keys, row, strict=True))


def check_refund(order_id: str, amount: float) -> dict[str, Any]:
    """What is left to refund on an order, checked before anyone is asked: a refund over it fails the run here, so
    no reviewer approves a refund the shop cannot make (a read: safe to repeat)."""
    order = look_up_order(order_id)
    left = round(float(order["total"]) - float(order["refunded"]), 2)
    if amount > left + 1e-9:
        raise ValueError(
            f"refund {amount:.2f} is more than is left to refund on order {order_id} ({left:.2f}); nobody was asked"
        )
    return {"refundable": left}


def refund(
    order_id: Annotated[str, Field(max_length=32)],
    amount: Annotated[float, Field(gt=0, le=10_000, description="Amount to refund")],
    customer_id: Annotated[str, Field(max_length=32)],
    reason: Annotated[str, Field(max_length=300, json_schema_extra={"x-multiline": True})] = "",
    refundable: Annotated[float | None, Field(ge=0, description="Left to refund when it was checked")] = None,
    *,
    idempotency_key: str,
) -> dict[str, Any]:
    """The argument schema hitl validates, snapshots on approvals and builds the Slack Modify form from comes
    from this signature (constraints as ``Annotated[..., Field(...)]``). ``refundable`` is what was left to refund
    when the request was checked, shown to the reviewer; the refund checks the order again as it runs."""
    with closing(connect()) as db, db:
        done = db.execute(
            "SELECT refund_id, amount FROM refunds WHERE idempotency_key = ?", (idempotency_key,)
        ).fetchone()
        if done:  # the same request again: return the original result, refund nothing more
            return {"refund_id": f"R-{done[0]}", "amount": done[1], "replayed": True}
        order = db.execute("SELECT total, refunded FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        if order is None:
            raise LookupError(f"no order {order_id}")
        if order[1] + amount > order[0] + 1e-9:
            raise ValueError(
                f"refund {amount:.2f} exceeds what is left on order {order_id} ({order[0] - order[1]:.2f})"
            )
        cur = db.execute(
            "INSERT INTO refunds (order_id, amount, reason, idempotency_key) VALUES (?, ?, ?, ?)",
            (order_id, amount, reason, idempotency_key),
        )
        db.execute("UPDATE orders SET refunded = refunded + ? WHERE order_id = ?", (amount, order_id))
        return {"refund_id": f"R-{cur.lastrowid}", "amount": amount, "replayed": False}


def send_email(
    to: Annotated[str, Field(max_length=200)],
    subject: Annotated[str, Field(max_length=150)],
    body: Annotated[str, Field(max_length=3000)],
    *,
    idempotency_key: str,
) -> dict[str, Any]:
    """E-mail the customer (recorded in the shop's outbox; deduplicates on its key)."""
    with closing(connect()) as db, db:
        done = db.execute("SELECT email_id FROM emails WHERE idempotency_key = ?", (idempotency_key,)).fetchone()
        if done:
            return {"email_id": done[0], "replayed": True}
        cur = db.execute(
            "INSERT INTO emails (recipient, subject, body, idempotency_key) VALUES (?, ?, ?, ?)",
            (to, subject, body, idempotency_key),
        )
        return {"email_id": cur.lastrowid, "replayed": False}


def delete_customer(customer_id: str, *, idempotency_key: str) -> dict[str, Any]:
    """Delete a customer's orders (irreversible: never trusted, a reason required)."""
    with closing(connect()) as db, db:
        n = db.execute("DELETE FROM orders WHERE customer_id = ?", (customer_id,)).rowcount
        return {"deleted_orders": n}
