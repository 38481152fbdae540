"""Guards for the layout: who may import whom, private names stay private, and the curated public APIs.

engine         the domain, ports, service, stores, runner, run lifecycle and composition: imports no other
               package of ours and no transport (Slack, aiohttp)
bot            the Slack adapter: imports engine, never the composition root or the sandbox
slack_sandbox  a local stand-in for Slack: imports none of our packages
hitl           the composition root and the public import surface: the only package importing engine and bot;
               its adapters (and ``import hitl`` itself) never load Slack or aiohttp
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import engine
import hitl
import hitl.api
import hitl.api.app
import hitl.mcp
import hitl.temporal
from engine.testing import conformance
from engine.testing.conformance import adapters as adapter_suite
from hitl.adapters import langgraph, openai_agents, pydantic_ai, strands

ROOT = Path(__file__).resolve().parents[1]
OURS = ("engine", "bot", "hitl", "slack_sandbox")
TRANSPORTS = {"slack_bolt", "slack_sdk", "aiohttp"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports count too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _tops(path: Path) -> set[str]:
    return {m.split(".")[0] for m in _imports(path)}


def test_engine_imports_no_other_package_of_ours_and_no_transport() -> None:
    for path in _modules("engine"):
        assert not (_tops(path) & ({"bot", "hitl", "slack_sandbox"} | TRANSPORTS)), path


def test_domain_is_pure() -> None:
    banned = {"asyncio", "redis", "sqlite3", "aiohttp", "socket", "os", "time", "engine.storage", "engine.service"}
    for path in _modules("engine/domain"):
        found = {m for m in _imports(path) if m in banned or any(m.startswith(b + ".") for b in banned)}
        assert not found, (path, found)


def test_only_the_redis_store_imports_redis() -> None:
    for package in OURS:
        for path in _modules(package):
            if path.is_relative_to(ROOT / "engine" / "storage" / "redis"):
                continue
            assert "redis" not in _tops(path), path


def test_bot_is_only_the_slack_adapter() -> None:
    for path in _modules("bot"):
        assert not (_tops(path) & {"hitl", "slack_sandbox"}), path


def test_framework_adapters_depend_on_the_engine_never_on_slack() -> None:
    """An agent process writes to the store; `hitl serve` on the same store posts and updates the cards."""
    for path in _modules("hitl/adapters"):
        assert not (_tops(path) & ({"bot", "slack_sandbox"} | TRANSPORTS)), path
        assert not any(m.startswith(("hitl.cli", "hitl.serve", "hitl.demo")) for m in _imports(path)), path


def test_the_sandbox_stands_alone() -> None:
    for path in _modules("slack_sandbox"):
        assert not (_tops(path) & {"engine", "bot", "hitl"}), path


def test_only_the_composition_root_imports_engine_and_bot() -> None:
    foreign = {p: {t for path in _modules(p) for t in _tops(path) if t in OURS and t != p} for p in OURS}
    assert [p for p, deps in foreign.items() if {"engine", "bot"} <= deps] == ["hitl"]
    assert foreign["engine"] == set() and foreign["slack_sandbox"] == set() and foreign["bot"] == {"engine"}


def test_importing_hitl_loads_no_slack_and_no_aiohttp() -> None:
    banned = "{'bot', 'slack_bolt', 'slack_sdk', 'aiohttp', 'slack_sandbox'}"
    code = f"import sys, hitl; print(sorted(m for m in sys.modules if m.split('.')[0] in {banned}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_no_module_imports_another_modules_private_names() -> None:
    offenders: list[str] = []
    for package in OURS:
        for path in _modules(package):
            tree = ast.parse(path.read_text())
            aliases: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OURS:
                    for a in node.names:
                        if a.name.startswith("_") and not a.name.startswith("__"):
                            offenders.append(f"{path.relative_to(ROOT)}: from {node.module} import {a.name}")
                        aliases.add(a.asname or a.name)
                elif isinstance(node, ast.Import):
                    aliases |= {a.asname or a.name for a in node.names if a.name.split(".")[0] in OURS}
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in aliases
                    and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                ):
                    offenders.append(f"{path.relative_to(ROOT)}: {node.value.id}.{node.attr}")
    assert offenders == []


def test_no_class_is_spread_over_modules_by_inheritance() -> None:
    """A class of ours may extend another of ours only across a real concept (an error tree, a protocol)."""
    allowed_bases = {"EngineError", "Protocol", "BaseModel", "Exception", "StrEnum"}
    offenders: list[str] = []
    for package in OURS:
        for path in _modules(package):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    for base in node.bases:
                        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                        if name.endswith(("Base", "Steps", "Mixin")) and name not in allowed_bases:
                            offenders.append(f"{path.relative_to(ROOT)}: {node.name}({name})")
    assert offenders == []


def test_public_apis_are_pinned() -> None:
    assert engine.__all__ == [
        "Approval",
        "ApprovalService",
        "ApprovalStore",
        "AuditEntry",
        "AuditLog",
        "Claim",
        "ClaimRefused",
        "ClaimState",
        "Clock",
        "DecideCommand",
        "Decision",
        "DecisionKind",
        "DecisionRefused",
        "EngineError",
        "ErrorCode",
        "ExecutionLedger",
        "HitlConfig",
        "IllegalTransition",
        "InvalidInput",
        "JobQueue",
        "Journal",
        "MessageMap",
        "MessageRef",
        "NotFound",
        "Notifier",
        "Page",
        "Policy",
        "PolicyContext",
        "PolicyError",
        "Proposal",
        "Purged",
        "Purger",
        "RateWindows",
        "Redactor",
        "Retention",
        "Reviewer",
        "Roles",
        "RunReporter",
        "RunStore",
        "StaleVersion",
        "Status",
        "Store",
        "StoreError",
        "SystemClock",
        "Tallies",
        "Tier",
        "TrustGrant",
        "TrustStore",
        "Verdict",
        "WindowStats",
        "action_hash",
        "batch_hash",
        "bounded",
        "canonical_json",
        "load_config",
        "open_store",
        "parse_config",
    ]
    assert hitl.__all__ == [
        "ActionRejected",
        "AgentResumer",
        "AgentWatcher",
        "Answer",
        "Approval",
        "ApprovalService",
        "Approvals",
        "Decided",
        "DecisionKind",
        "EngineError",
        "ErrorCode",
        "GateRefused",
        "HitlConfig",
        "RunLifecycle",
        "RunResult",
        "RunStatus",
        "Runner",
        "Runtime",
        "RuntimeSettings",
        "SlackAsk",
        "Status",
        "SystemClock",
        "Ticket",
        "Tier",
        "ToolCall",
        "ToolGate",
        "World",
        "Worlds",
        "load_config",
        "load_workflow",
        "open_runtime",
        "open_store",
        "parse_config",
    ]
    assert conformance.__all__ == [
        "STORE_SUITES",
        "ApprovalsConformance",
        "FailureConformance",
        "JobsConformance",
        "JournalConformance",
        "LedgerConformance",
        "RecordsConformance",
        "RetentionConformance",
        "RunsConformance",
        "TalliesConformance",
        "TrustConformance",
        "WindowsConformance",
    ]
    assert adapter_suite.__all__ == [
        "ADAPTER_CONFIG",
        "AdapterConformance",
        "BreakableStore",
        "AgentHarness",
        "AgentRun",
        "AgentWorld",
        "Ledger",
        "ScriptedCall",
    ]
    assert strands.__all__ == ["HitlIntervention", "pending_approvals", "resume"]
    assert langgraph.__all__ == ["HitlToolNode", "Resumer", "gated_call"]
    assert openai_agents.__all__ == ["HitlRunner", "gated"]
    assert pydantic_ai.__all__ == ["HitlRunner", "HitlToolset"]
    assert hitl.api.__all__ == ["mint_token", "token_hash"]
    assert hitl.api.app.__all__ == ["PREFIX", "api_app"]
    assert hitl.mcp.__all__ == ["FRAMEWORK", "Gateway", "Upstreams", "serve_http", "serve_stdio"]
    assert hitl.temporal.__all__ == [
        "FRAMEWORK",
        "Decision",
        "HitlActivities",
        "TemporalResumer",
        "require_approval",
        "run_approved",
    ]
    modules = [engine, hitl, hitl.api, hitl.mcp, conformance, adapter_suite, strands, langgraph, openai_agents]
    modules += [pydantic_ai, hitl.temporal]
    for module in modules:
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
