"""Guards for the layout: import rules and the curated public API."""

from __future__ import annotations

import ast
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0] if not node.module.startswith("engine.") else node.module)
    return out


def test_engine_never_imports_bot_or_transports() -> None:
    banned = {"bot", "slack_bolt", "slack_sdk", "aiohttp"}
    for path in (ROOT / "engine").rglob("*.py"):
        if path.parts[-2] == "cli" or path.name == "cli.py":
            continue  # the composition root may wire both packages
        assert not (_imports(path) & banned), path


def test_domain_is_pure() -> None:
    banned = {
        "asyncio",
        "redis",
        "sqlite3",
        "aiohttp",
        "socket",
        "os",
        "time",
        "engine.storage",
        "engine.service",
    }
    for path in (ROOT / "engine" / "domain").rglob("*.py"):
        found = {m for m in _imports(path) if m in banned or any(m.startswith(b + ".") for b in banned)}
        assert not found, (path, found)


def test_only_the_redis_store_imports_redis() -> None:
    for path in (ROOT / "engine").rglob("*.py"):
        if "redis" in path.relative_to(ROOT).parts[:3] or "cli" in path.parts:
            continue
        assert "redis" not in _imports(path), path


def test_public_api_is_pinned() -> None:
    assert sorted(engine.__all__) == engine.__all__
    for name in engine.__all__:
        assert hasattr(engine, name), name
    assert set(engine.__all__) >= {"ApprovalService", "Approval", "open_store", "action_hash", "ErrorCode"}
