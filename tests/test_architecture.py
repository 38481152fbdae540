"""Guards for the layout: who may import whom, the engine's layers, private names stay private, the one public door.

One import package, ``hitl``. Its parts, by folder:

engine/        ``hitl.engine``: the domain, ports, service, stores, runner, run lifecycle and composition; imports
               no other part of ours and no transport (Slack, aiohttp); its packages stand in layers (LAYERS)
bot/           ``hitl.bot``: the Slack adapter; imports the engine, never the composition root or the sandbox
hitl/sandbox/  ``hitl.sandbox``: a local stand-in for Slack; imports none of our other parts
hitl/          the composition root and the public door (``hitl``, ``hitl.testing``, ``hitl.adapters.*``): the
               only part importing both the engine and the bot; its adapters (and ``import hitl``) never load Slack
               or aiohttp

Across all of them, no module imports itself around a loop (IMPORT_ROOTS, test_no_import_cycle_between_our_modules).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import hitl
import hitl.api
import hitl.api.app
import hitl.receipts
import hitl.stores
import hitl.testing
import hitl.testing.conformance

ROOT = Path(__file__).resolve().parents[1]
TRANSPORTS = {"slack_bolt", "slack_sdk", "aiohttp"}
PARTS = {"engine": ROOT / "engine", "bot": ROOT / "bot", "sandbox": ROOT / "hitl" / "sandbox", "root": ROOT / "hitl"}

LAYERS: list[set[str]] = [
    {"errors"},
    {"domain", "clocks", "process", "receipts.claims"},
    {"config", "workflow", "receipts.spec", "consequences.callables"},
    {"ports", "receipts.ports"},
    {"storage", "policy_engines"},
    {"oversight", "receipts", "subscribers", "consequences"},
    {"delegation"},
    {"admission"},
    {"service", "proposing", "deciding"},
    {"execution"},
    {"runner"},
    {"agents"},
    {"runtime"},
    {"testing"},
]
"""The engine's packages from the ground up: a module imports only from its own layer or the layers below. An entry
names a package or module of the engine root (``storage``) or, for a package whose modules stand in different
layers, one of its modules (``receipts.claims``); a module stands where the longest entry naming it says."""


def _layer(path: tuple[str, ...]) -> int | None:
    """The layer of the engine module at ``path`` (its names below the engine: ``("receipts", "claims")``)."""
    for depth in range(len(path), 0, -1):
        name = ".".join(path[:depth])
        found = [i for i, names in enumerate(LAYERS) if name in names]
        if found:
            return found[0]
    return None


def _modules(part: str) -> list[Path]:
    found = sorted(PARTS[part].rglob("*.py"))  # rglob does not follow hitl/engine and hitl/bot (links)
    if part == "root":
        found = [p for p in found if not p.is_relative_to(PARTS["sandbox"])]
    return found


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports count too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _part(module: str) -> str | None:
    """Which part of ours a module name belongs to (``None``: not ours)."""
    parts = module.split(".")
    if parts[0] != "hitl":
        return None
    if len(parts) > 1 and parts[1] in ("engine", "bot", "sandbox"):
        return parts[1]
    return "root"


def _parts(path: Path) -> set[str]:
    return {p for m in _imports(path) if (p := _part(m)) is not None}


def _tops(path: Path) -> set[str]:
    return {m.split(".")[0] for m in _imports(path)}


def test_every_module_of_ours_is_imported_as_hitl() -> None:
    """Our folders are installed under ``hitl`` only, so a user's own ``engine.py`` or ``bot/`` never meets ours."""
    for part in PARTS:
        for path in _modules(part):
            assert not (_tops(path) & {"engine", "bot", "slack_sandbox"}), path


def test_engine_imports_no_other_part_of_ours_and_no_transport() -> None:
    for path in _modules("engine"):
        assert _parts(path) <= {"engine"}, path
        assert not (_tops(path) & TRANSPORTS), path


def _upward(parts: tuple[str, ...], imports: set[str]) -> list[str]:
    """Which of ``imports`` (module names) the engine module at ``parts`` may not import: they stand above it."""
    mine = _layer(parts)
    assert mine is not None, f"engine/{parts[0]} is in no layer of LAYERS"
    upward = []
    for module in sorted(m for m in imports if m.startswith("hitl.engine.")):
        theirs = _layer(tuple(module.split(".")[2:]))
        assert theirs is not None, f"{module} is in no layer of LAYERS"
        if theirs > mine:
            upward.append(module)
    return upward


def test_engine_layers_only_import_downwards() -> None:
    upward: list[str] = []
    for path in _modules("engine"):
        parts = path.relative_to(PARTS["engine"]).with_suffix("").parts
        if parts != ("__init__",):
            upward += [f"{path.relative_to(ROOT)} -> {m}" for m in _upward(parts, _imports(path))]
    assert upward == []


def test_engine_layers_cover_the_engine() -> None:
    tops = {p.name.removesuffix(".py") for p in PARTS["engine"].iterdir() if p.suffix == ".py" or p.is_dir()}
    named = {name.split(".")[0] for name in set().union(*LAYERS)}
    assert tops - {"__init__", "__pycache__"} == named
    for name in set().union(*LAYERS):  # a module named in a layer is there
        where = PARTS["engine"].joinpath(*name.split("."))
        assert where.is_dir() or where.with_suffix(".py").is_file(), name


def test_storage_cannot_import_what_uses_a_store() -> None:
    """The stores stand alone in their layer, right above the ports: a store may import the ports and the domain,
    never the service or anything else that uses a store."""
    users = [
        "hitl.engine.service",
        "hitl.engine.oversight.stop_switch",
        "hitl.engine.receipts.issuing",
        "hitl.engine.subscribers.events",
        "hitl.engine.delegation.delegations",
        "hitl.engine.admission.guards",
    ]
    below = {"hitl.engine.ports", "hitl.engine.receipts.ports", "hitl.engine.domain.models", "hitl.engine.errors"}
    for store in [("storage", "sqlite", "store"), ("storage", "redis", "receipts"), ("storage", "factory")]:
        assert _upward(store, set(users)) == sorted(users)
        assert _upward(store, below) == []


def test_the_engine_root_holds_only_its_ground_floor() -> None:
    """Everything else in the engine is grouped into a package named for its concept."""
    loose = {p.stem for p in PARTS["engine"].glob("*.py")}
    assert loose == {"__init__", "errors", "clocks", "ports", "service"}


def test_receipts_are_one_package_and_the_engine_sends_no_http_request() -> None:
    """The engine's receipts live in ``engine/receipts/`` (a store's ledger is its backend's, the conformance suite
    the testing package's); the client that asks ``hitl serve`` for them is the composition root's."""
    engine = PARTS["engine"]
    elsewhere = (engine / "receipts", engine / "storage", engine / "testing")
    stray = [p for p in _modules("engine") if "receipt" in p.stem and not any(map(p.is_relative_to, elsewhere))]
    assert stray == []
    clients = {"urllib.request", "http.client", "httpx", "requests"} | TRANSPORTS
    assert [p for p in _modules("engine") if _imports(p) & clients] == []


def test_domain_is_pure() -> None:
    banned = {"asyncio", "redis", "sqlite3", "aiohttp", "socket", "os", "time", "hitl.engine.storage"}
    banned |= {"hitl.engine.service"}
    for path in sorted((PARTS["engine"] / "domain").rglob("*.py")):
        found = {m for m in _imports(path) if m in banned or any(m.startswith(b + ".") for b in banned)}
        assert not found, (path, found)


def test_only_the_redis_store_imports_redis() -> None:
    for part in PARTS:
        for path in _modules(part):
            if path.is_relative_to(PARTS["engine"] / "storage" / "redis"):
                continue
            assert "redis" not in _tops(path), path


def test_bot_is_only_the_slack_adapter() -> None:
    for path in _modules("bot"):
        assert _parts(path) <= {"bot", "engine"}, path


def test_framework_adapters_depend_on_the_engine_never_on_slack() -> None:
    """An agent process writes to the store; `hitl serve` on the same store posts and updates the cards."""
    for path in sorted((PARTS["root"] / "adapters").rglob("*.py")):
        assert not (_parts(path) & {"bot", "sandbox"}), path
        assert not (_tops(path) & TRANSPORTS), path
        assert not any(m.startswith(("hitl.cli", "hitl.serve", "hitl.demo")) for m in _imports(path)), path


def test_the_sandbox_stands_alone() -> None:
    for path in _modules("sandbox"):
        assert _parts(path) <= {"sandbox"}, path


def test_only_the_composition_root_imports_engine_and_bot() -> None:
    foreign = {p: {t for path in _modules(p) for t in _parts(path) if t != p} for p in PARTS}
    assert [p for p, deps in foreign.items() if {"engine", "bot"} <= deps] == ["root"]
    assert foreign["engine"] == set() and foreign["sandbox"] == set() and foreign["bot"] == {"engine"}


IMPORT_ROOTS = {PARTS["engine"]: "hitl.engine", PARTS["bot"]: "hitl.bot", ROOT / "hitl": "hitl"}
"""Where each folder of ours is imported from (``hitl/engine`` and ``hitl/bot`` are links to the first two)."""


def _module_names() -> dict[str, tuple[Path, bool]]:
    """Every module of ours by the name it is imported as, with its file and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for folder, prefix in IMPORT_ROOTS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            package = parts[-1] == "__init__"
            found[".".join((prefix, *(parts[:-1] if package else parts)))] = (path, package)
    return found


def _import_graph() -> dict[str, set[str]]:
    """Which modules of ours each module of ours imports, at any depth (function-level imports count too, as in
    :func:`_imports`), relative imports resolved, and ``from package import module`` read as importing the module."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package holding this module, `level - 1` packages up
                    anchor = name.split(".") if package else name.split(".")[:-1]
                    base = ".".join([*anchor[: len(anchor) - node.level + 1], *([base] if base else [])])
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        found.add(f"{base}.{a.name}")
                    elif base in modules:
                        found.add(base)
        graph[name] = found - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import loop for each edge a depth-first walk of ``graph`` meets back into its own path (none: the
    modules stand in an order where each imports only what stands before it)."""
    loops: list[list[str]] = []
    path: list[str] = []
    walked: set[str] = set()

    def walk(module: str) -> None:
        path.append(module)
        for imported in sorted(graph[module]):
            if imported in path:
                loops.append([*path[path.index(imported) :], imported])
            elif imported not in walked:
                walk(imported)
        path.pop()
        walked.add(module)

    for module in sorted(graph):
        if module not in walked:
            walk(module)
    return loops


def test_the_import_graph_reads_every_kind_of_import() -> None:
    """So that no cycle below goes unseen: a top-level import, a function-level one, a relative one, and a
    ``from package import module``."""
    graph = _import_graph()
    assert "hitl.cli.resume" in graph["hitl.cli.app"]  # top level
    assert "hitl.cli.command" in graph["hitl.cli.resume"]  # inside the command's function
    assert "hitl.api.models" in graph["hitl.api.openapi"]  # `from . import models as m`
    assert "hitl.api.execution_models" in graph["hitl.api.receipts"]  # `from .execution_models import (...)`
    assert "hitl.engine.subscribers.tallies" in graph["hitl.engine.subscribers"]  # a package's own relative import


def test_no_import_cycle_between_our_modules() -> None:
    """No module of ours imports, directly or through others, a module that imports it back: module-level and
    function-level imports both count (a function-level import is often how a loop is hidden, and it still ties
    the two modules' concepts together). A loop is broken by moving what both need into a module of its own (as
    ``hitl resume`` moved out of ``hitl/cli/app.py``, for ``hitl answer`` and the app to import)."""
    assert [" -> ".join(loop) for loop in _cycles(_import_graph())] == []


def test_importing_hitl_loads_no_slack_and_no_aiohttp() -> None:
    code = (
        "import sys, hitl, hitl.testing; banned = ('hitl.bot', 'hitl.sandbox', 'slack_bolt', 'slack_sdk', 'aiohttp');"
        "print(sorted(m for m in sys.modules if m.startswith(banned)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


PUBLIC_TEXTS = ["README.md", "docs/pages/*.md", "examples/**/*.py", "examples/**/*.md"]
"""What users read and copy: every import in them is of a public name."""
PUBLIC_MODULES = re.compile(
    r"hitl(\.testing(\.conformance)?|\.stores|\.adapters\.\w+|\.mcp|\.temporal|\.api|\.receipts)?"
)


def test_readme_docs_and_examples_import_only_public_names() -> None:
    found: list[str] = []
    for pattern in PUBLIC_TEXTS:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_relative_to(ROOT / "examples" / "refund"):  # a link to hitl/demo/refund (no imports)
                continue
            for line in path.read_text().splitlines():
                m = re.match(r"\s*(?:from (\S+) import|import (\S+))", line)
                module = m and (m.group(1) or m.group(2))
                if module and module.split(".")[0] in ("hitl", "engine", "bot", "slack_sandbox"):
                    found.append(f"{path.relative_to(ROOT)}: {module}")
    assert found, "the scan found no import at all"
    assert [f for f in found if not PUBLIC_MODULES.fullmatch(f.split(": ")[1])] == []


def test_no_module_imports_another_modules_private_names() -> None:
    offenders: list[str] = []
    for part in PARTS:
        for path in _modules(part):
            tree = ast.parse(path.read_text())
            aliases: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and _part(node.module) is not None:
                    for a in node.names:
                        if a.name.startswith("_") and not a.name.startswith("__"):
                            offenders.append(f"{path.relative_to(ROOT)}: from {node.module} import {a.name}")
                        aliases.add(a.asname or a.name)
                elif isinstance(node, ast.Import):
                    aliases |= {a.asname or a.name for a in node.names if _part(a.name) is not None}
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
    for part in PARTS:
        for path in _modules(part):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    for base in node.bases:
                        name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                        if name.endswith(("Base", "Steps", "Mixin")) and name not in allowed_bases:
                            offenders.append(f"{path.relative_to(ROOT)}: {node.name}({name})")
    assert offenders == []


def _doors() -> None:
    """Import ``hitl.mcp`` and ``hitl.temporal``, so that ``hitl.mcp`` and ``hitl.temporal`` name them: the tests that
    read the frameworks' doors import them, not the module's collection, which every xdist worker pays for (their
    SDKs, the OpenAI Agents SDK's, LangGraph's, Pydantic AI's, Strands', MCP's and Temporal's, are ~5 s of CPU)."""
    importlib.import_module("hitl.mcp")
    importlib.import_module("hitl.temporal")


def test_public_apis_are_pinned() -> None:
    from hitl.adapters import langgraph, openai_agents, pydantic_ai, strands

    _doors()

    assert hitl.__all__ == [
        "ActionRejected",
        "AgentResumer",
        "AgentWatcher",
        "Answer",
        "Approval",
        "ApprovalService",
        "Approvals",
        "AuditEntry",
        "DecideRequest",
        "DecisionKind",
        "DecisionRefused",
        "EngineError",
        "ErrorCode",
        "GateRefused",
        "GroupDecideRequest",
        "GroupMember",
        "GroupOutcome",
        "HitlConfig",
        "HitlDeprecationWarning",
        "InvalidInput",
        "MemberOutcome",
        "MemberResult",
        "NotFound",
        "Page",
        "ProposeRequest",
        "Proposal",
        "SlackAsk",
        "Status",
        "Store",
        "StoreError",
        "SystemClock",
        "Ticket",
        "Tier",
        "ToolCall",
        "ToolGate",
        "current_receipt",
        "load_config",
        "open_store",
        "parse_config",
    ]
    assert hitl.testing.__all__ == ["FakeClock", "make_approval"]
    assert hitl.stores.__all__ == [
        "AlertStates",
        "Approval",
        "ApprovalFilter",
        "ApprovalStore",
        "AuditBreak",
        "AuditEntry",
        "AuditLog",
        "CallHolds",
        "Claim",
        "ClaimIntent",
        "ClaimState",
        "Commit",
        "Committed",
        "DecideCommand",
        "Delegation",
        "DelegationStore",
        "ExecutionLedger",
        "HaltOrder",
        "HaltOrders",
        "Issued",
        "Job",
        "JobQueue",
        "Journal",
        "MessageMap",
        "MessageRef",
        "Opened",
        "OutcomeRecord",
        "Page",
        "Purged",
        "Purger",
        "RateWindows",
        "ReceiptLedger",
        "Redemption",
        "Retention",
        "Reviewer",
        "RunStore",
        "Status",
        "Store",
        "StoredRun",
        "Tallies",
        "TallyKey",
        "TallyRow",
        "TrustGrant",
        "TrustStore",
        "WindowStats",
        "apply_decision",
        "apply_expiry",
        "finished",
        "next_claim",
        "run_to_resume",
        "trust_granted",
    ]
    assert hitl.testing.conformance.__all__ == [
        "ADAPTER_CONFIG",
        "STORE_SUITES",
        "AdapterConformance",
        "AgentHarness",
        "AlertsConformance",
        "ApprovalsConformance",
        "DelegationsConformance",
        "FailureConformance",
        "HaltsConformance",
        "HoldsConformance",
        "JobsConformance",
        "JournalConformance",
        "LedgerConformance",
        "ReceiptsConformance",
        "RecordsConformance",
        "RetentionConformance",
        "RunsConformance",
        "TalliesConformance",
        "TrustConformance",
        "WindowsConformance",
    ]
    assert strands.__all__ == ["HitlIntervention", "pending_approvals", "resume"]
    assert langgraph.__all__ == ["HitlToolNode", "Resumer", "gated_call"]
    assert openai_agents.__all__ == ["HitlRunner", "gated"]
    assert pydantic_ai.__all__ == ["HitlRunner", "HitlToolset"]
    assert hitl.api.__all__ == ["mint_token", "token_hash"]
    assert hitl.receipts.__all__ == [
        "MCP_META_KEY",
        "RECEIPT_TYPE",
        "KeySet",
        "Keys",
        "ReceiptError",
        "ReceiptFailure",
        "RemoteKeys",
        "args_sha256",
        "verified_claims",
        "verify",
    ]
    assert hitl.api.app.__all__ == ["PREFIX", "api_app", "authzen_app", "endpoints", "openapi_document"]
    assert hitl.mcp.__all__ == ["FRAMEWORK", "Gateway", "Upstreams", "serve_http", "serve_stdio"]
    assert hitl.temporal.__all__ == [
        "FRAMEWORK",
        "Decision",
        "HitlActivities",
        "TemporalResumer",
        "require_approval",
        "run_approved",
    ]
    modules = [hitl, hitl.testing, hitl.testing.conformance, hitl.api, hitl.mcp, hitl.temporal]
    modules += [strands, langgraph, openai_agents, pydantic_ai]
    for module in modules:
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)


def test_every_public_function_and_class_has_a_docstring() -> None:
    """Module-level public functions and classes everywhere; and every public method and property of what the
    public door exports (``hitl``, ``hitl.testing``, the adapters, MCP, Temporal, the API)."""
    from hitl.adapters import langgraph, openai_agents, pydantic_ai, strands

    _doors()

    missing: list[str] = []
    for part in PARTS:
        for path in _modules(part):
            for node in ast.parse(path.read_text()).body:
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue
                if not node.name.startswith("_") and ast.get_docstring(node) is None:
                    missing.append(f"{path.relative_to(ROOT)}: {node.name}")
    modules = [hitl, hitl.testing, hitl.testing.conformance, hitl.api, hitl.mcp, hitl.temporal]
    for module in [*modules, strands, langgraph, openai_agents, pydantic_ai]:
        for name in module.__all__:
            obj = getattr(module, name)
            if not inspect.isclass(obj):
                continue
            for attr, member in vars(obj).items():
                fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if attr.startswith(("_", "test_")) or not inspect.isfunction(fn):
                    continue  # a conformance test's name says what it checks
                if not (fn.__doc__ or "").strip():
                    missing.append(f"{module.__name__}.{name}.{attr}")
    assert missing == []


def _documented_args(doc: str) -> list[str]:
    """The names a Google-style ``Args:`` section of ``doc`` documents."""
    names: list[str] = []
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "Args:":
            continue
        indent = None
        for entry in lines[i + 1 :]:
            if not entry.strip():
                break
            depth = len(entry) - len(entry.lstrip())
            indent = depth if indent is None else indent
            if depth < indent:
                break
            m = re.match(r"\s*\*{0,2}(\w+)( \([^)]*\))?:", entry)
            if depth == indent and m:
                names.append(m.group(1))
    return names


def _accepted(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    """The names a function takes, or a class's constructor and fields."""
    if isinstance(node, ast.ClassDef):
        names = {t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__init__":
                names |= _accepted(item)
        return names
    a = node.args
    names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return names


def test_every_documented_parameter_exists() -> None:
    """A docstring's ``Args:`` names only what its function (or class) takes: a renamed parameter is renamed in
    its documentation too."""
    stale: list[str] = []
    for part in PARTS:
        for path in _modules(part):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    doc = ast.get_docstring(node) or ""
                    missing = [n for n in _documented_args(doc) if n not in _accepted(node)]
                    stale += [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n}" for n in missing]
    assert stale == []
