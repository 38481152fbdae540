"""Consequences the tests name in hitl.yaml (``tests.consequence_tools:refund``): what a refund will do, and, asked
by the refund's ``reason``, a consequence that sleeps past its bound, reads its environment, or misbehaves."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Any

BOUNDED_REFUND = """    refund:
      role: support
      consequence: "tests.consequence_tools:refund"
      consequence_limits: {timeout: 0.5s, workers: 1}
    note: {role: support}
"""
"""The entries of a policy's ``tools:`` that the consequence suites share: ``refund`` asks the support role with its
consequence bounded to half a second on one worker (so ``sleep`` overruns it), ``note`` asks it with none."""

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


TICKS: dict[str, Any] = {"n": 0, "fail_from": None}
"""What :func:`ticking` returns next: its run count, and from which run on it raises (None: never)."""


def ticking(args: dict[str, Any]) -> object:
    """A consequence that changes on every run (its ``run`` change), with a ``generated_at`` change that does too,
    raising from ``TICKS["fail_from"]`` on; ``args["same"]`` keeps ``run`` still (only ``generated_at`` moves)."""
    TICKS["n"] += 1
    n = TICKS["n"]
    if TICKS["fail_from"] is not None and n >= TICKS["fail_from"]:
        raise RuntimeError("the system it reads is down")
    run = 0 if args.get("same") else n
    return {"summary": f"Pays {args['amount']}", "changes": {"run": [run - 1, run], "generated_at": [0, n]}}


INVOICE: dict[str, int] = {"n": 0}
"""How many times :func:`invoice` ran in this process."""


def invoice(args: dict[str, Any]) -> object:
    """What paying an invoice leaves to pay: 900.00 the first time it runs in a process, 300.00 less each time after
    (another payment landing between approval and execution, for the drift screenshot)."""
    INVOICE["n"] += 1
    left = 900.0 - 300.0 * (INVOICE["n"] - 1)
    amount = float(args["amount"])
    return {
        "summary": f"Invoice {args['invoice']} will have {left - amount:.2f} left to pay",
        "changes": {"Left to pay": {"before": left, "after": left - amount}},
    }


def pay(args: dict[str, Any]) -> object:
    """What a payment will do: who gets how much."""
    return {"summary": f"Pays {float(args['amount']):.2f} to {args['to']}", "changes": {"paid": [0, args["amount"]]}}


def withdrawing(args: dict[str, Any]) -> object:
    """What a payment will do. While the file ``$WITHDRAW_ORDER`` names exists (holding ``URL TOKEN APPROVAL_ID
    SKIP``), each run counts ``SKIP`` down, and the run that finds it at 0 has that approval withdrawn through
    ``hitl serve``'s API: a person's withdrawal landing at one chosen run (a hand-over's check again, after every
    earlier look)."""
    order = os.environ.get("WITHDRAW_ORDER", "")
    if order and os.path.exists(order):
        with open(order, encoding="utf-8") as f:
            url, token, approval_id, skip = f.read().split()
        if int(skip) > 0:
            with open(order, "w", encoding="utf-8") as f:
                f.write(f"{url} {token} {approval_id} {int(skip) - 1}")
            return pay(args)
        os.remove(order)
        asked = urllib.request.Request(
            f"{url}/api/v1/approvals/{approval_id}/withdrawal",
            data=json.dumps({"reason": "withdrawn mid hand-over"}).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(asked, timeout=10) as answered:  # noqa: S310 - the test's own hitl serve
            assert answered.status == 200
    return pay(args)
