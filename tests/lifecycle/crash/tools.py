"""Crash-test tools. Effects are rows in a SQLite ledger; a tool can kill its own process (SIGKILL) at a chosen
point, once, to stand in for a worker that dies there: CRASH_AT=before_pay | after_pay | before_after."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["CRASH_LEDGER"], timeout=30, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS calls (tool TEXT, key TEXT, pid INTEGER, receipt TEXT)")
    db.execute("CREATE TABLE IF NOT EXISTS effects (tool TEXT, key TEXT)")
    return db


def _maybe_die(point: str) -> None:
    marker = Path(os.environ["CRASH_LEDGER"] + f".{point}")
    if os.environ.get("CRASH_AT") == point and not marker.exists():
        marker.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)


def _effect(tool: str, key: str, *, dedupe: bool, receipt: str | None = None) -> None:
    with _db() as db:
        db.execute("INSERT INTO calls VALUES (?, ?, ?, ?)", (tool, key, os.getpid(), receipt))
        _maybe_die(f"before_{tool}")
        if not (dedupe and db.execute("SELECT 1 FROM effects WHERE key = ?", (key,)).fetchone()):
            db.execute("INSERT INTO effects VALUES (?, ?)", (tool, key))
        _maybe_die(f"after_{tool}")


def pay(amount: float, *, idempotency_key: str, receipt: str | None = None) -> dict[str, Any]:
    """Moves money. Whether it deduplicates on its key is what the workflow declares (PAY_DEDUPES). The receipt
    of the attempt is kept with the call (a payment service would check it)."""
    time.sleep(0.03)  # a payment call takes time: the effect is in flight while the other replicas run rounds
    _effect("pay", idempotency_key, dedupe=os.environ.get("PAY_DEDUPES") == "1", receipt=receipt)
    return {"paid": amount}


def after(*, idempotency_key: str) -> dict[str, Any]:
    _effect("after", idempotency_key, dedupe=True)
    return {"notified": True}


def paid(amount: float, *, idempotency_key: str) -> dict[str, Any]:
    """Reconcile hook: asks the ledger whether this payment happened."""
    with _db() as db:
        found = db.execute("SELECT 1 FROM effects WHERE key = ?", (idempotency_key,)).fetchone()
    return {"done": True, "output": {"paid": amount, "reconciled": True}} if found else {"done": False}
