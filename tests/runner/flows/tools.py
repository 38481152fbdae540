"""Tools for the runner tests. Effects are lines in files under $HITL_TEST_DIR, deduplicated by key."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _dir() -> Path:
    return Path(os.environ["HITL_TEST_DIR"])


def _log(name: str, entry: dict[str, Any]) -> None:
    with (_dir() / f"{name}.jsonl").open("a") as f:
        f.write(json.dumps(entry) + "\n")


def read(name: str) -> list[dict[str, Any]]:
    path = _dir() / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def draft(topic: str, feedback: str = "") -> dict[str, Any]:
    _log("calls", {"tool": "draft", "feedback": feedback})
    text = f"A note about {topic}." + (f" (revised: {feedback})" if feedback else "")
    return {"text": text, "words": len(text.split())}


def publish(text: str, *, idempotency_key: str) -> dict[str, Any]:
    _log("calls", {"tool": "publish", "key": idempotency_key})
    if os.environ.get("HITL_TEST_CRASH") == "publish" and not (_dir() / "crashed").exists():
        (_dir() / "crashed").write_text("1")
        if not any(e["key"] == idempotency_key for e in read("published")):
            _log("published", {"key": idempotency_key, "text": text})
        raise KeyboardInterrupt("simulated crash after the effect, before its outcome was recorded")
    if not any(e["key"] == idempotency_key for e in read("published")):
        _log("published", {"key": idempotency_key, "text": text})
    return {"published": True}


def send(to: str, *, idempotency_key: str) -> dict[str, Any]:
    _log("calls", {"tool": "send", "to": to})
    if to == os.environ.get("HITL_TEST_FAIL_TO"):
        raise ConnectionError(f"mail server refused {to}")
    if not any(e["key"] == idempotency_key for e in read("sent")):
        _log("sent", {"key": idempotency_key, "to": to})
    return {"to": to}


def improve(round: int, feedback: str = "") -> dict[str, Any]:
    _log("calls", {"tool": "improve", "round": round, "feedback": feedback})
    return {"score": 40 + 20 * round, "feedback": feedback}


def was_published(text: str, *, idempotency_key: str) -> dict[str, Any]:
    """Reconcile hook for publish: asks the "business system" (the published log) whether the attempt happened."""
    found = any(e["key"] == idempotency_key for e in read("published"))
    return {"done": True, "output": {"published": True, "reconciled": True}} if found else {"done": False}
