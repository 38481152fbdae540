"""Tools of the research desk. Every call is a line in the effect log (``HITL_EFFECTS``, default
``.hitl/research-effects.jsonl``), so you can see that nothing ran twice across pauses, resumes and crashes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SOURCES = {
    "solid-state batteries": [
        "Solid electrolytes remove the flammable liquid layer (Journal of Power Sources, 2025).",
        "Pilot lines reached 2 GWh a year; cost is still 3x lithium-ion (industry survey, 2025).",
    ],
}


def log_path() -> Path:
    return Path(os.environ.get("HITL_EFFECTS", ".hitl/research-effects.jsonl"))


def _log(tool: str, key: str, **fields: Any) -> None:
    path = log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "key": key, **fields}) + "\n")


def effects() -> list[dict[str, Any]]:
    """Every call so far, in order."""
    path = log_path()
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def search(query: str, *, idempotency_key: str) -> dict[str, Any]:
    """Search the research library (a read: safe to repeat)."""
    _log("search", idempotency_key, query=query)
    found = next((v for k, v in SOURCES.items() if k in query.lower()), ["No sources found."])
    return {"query": query, "results": found}


def save_note(title: str, text: str, *, idempotency_key: str) -> dict[str, Any]:
    """Keep a note in the team's notebook."""
    _log("save_note", idempotency_key, title=title)
    return {"saved": title}


def publish_report(title: str, body: str, *, idempotency_key: str) -> dict[str, Any]:
    """Publish a report to the company wiki (an effect people see)."""
    _log("publish_report", idempotency_key, title=title, body=body)
    return {"url": f"https://wiki.example.com/reports/{abs(hash(idempotency_key)) % 10000}", "title": title}


def send_email(to: str, subject: str, body: str, *, idempotency_key: str) -> dict[str, Any]:
    """E-mail someone."""
    _log("send_email", idempotency_key, to=to, subject=subject)
    return {"sent_to": to}
