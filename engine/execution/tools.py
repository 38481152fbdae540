"""Loading and calling workflow tools (plain Python callables, sync or async)."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hitl.engine.errors import EngineError, ErrorCode, InvalidInput
from hitl.engine.execution.schema import ToolSchema, signature_schema

if TYPE_CHECKING:  # a workflow's tool definitions come parsed: the gate and a listing never import workflow models
    from hitl.engine.workflow.definition import ToolDef

__all__ = ["Tool", "load_tools", "names_receipt"]


class Tool:
    """A callable with its schema. Receives ``idempotency_key=`` when its signature accepts it, and ``receipt=``
    (the execution's signed receipt, None where none is issued) when it names a ``receipt`` parameter: neither is a
    tool argument (the schema, the action hash and the receipt's ``args_sha256`` leave them out).

    Args:
        name: the tool's name in policies and approvals.
        fn: the effect, sync or async.
        schema: argument schema (None: arguments taken as they are, for guarded functions that declare none).
        idempotent: the tool honours its idempotency key, so running it again after a crash is safe.
        reconcile: asks the business system whether an attempt whose outcome was lost happened; called with the
            arguments and ``idempotency_key=``, it returns ``{"done": true, "output": ...}`` or ``{"done": false}``.
        receipt_as: the parameter of ``fn`` that takes the receipt (default ``receipt``, when ``fn`` names it).
    """

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        schema: ToolSchema | None,
        *,
        idempotent: bool = False,
        reconcile: Callable[..., Any] | None = None,
        receipt_as: str | None = None,
    ) -> None:
        self.name = name
        self.fn = fn
        self.schema = schema or ToolSchema(name, None)
        self.idempotent = idempotent
        self.reconcile_fn = reconcile
        self._wants_key = _wants_key(fn)
        self.receipt_as = receipt_as or ("receipt" if names_receipt(fn) else None)

    async def __call__(self, args: dict[str, Any], *, idempotency_key: str, receipt: str | None = None) -> Any:
        extra = {self.receipt_as: receipt} if self.receipt_as is not None else {}
        return await _call(self.fn, {**args, **extra}, idempotency_key, self._wants_key)

    async def reconcile(self, args: dict[str, Any], *, idempotency_key: str) -> tuple[bool, Any] | None:
        """``(done, output)`` from the reconcile hook; None when there is none or its answer is not readable
        (then a person decides)."""
        if self.reconcile_fn is None:
            return None
        answer = await _call(self.reconcile_fn, args, idempotency_key, _wants_key(self.reconcile_fn))
        if not isinstance(answer, dict) or not isinstance(answer.get("done"), bool):
            return None
        return answer["done"], answer.get("output")


def names_receipt(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` names a ``receipt`` parameter (a ``**kwargs`` does not count: a receipt goes only to a function
    that asks for it by name)."""
    try:
        param = inspect.signature(fn).parameters.get("receipt")
    except (TypeError, ValueError):
        return False
    return param is not None and param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD)


def _wants_key(fn: Callable[..., Any]) -> bool:
    params = inspect.signature(fn).parameters
    return "idempotency_key" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


async def _call(fn: Callable[..., Any], args: dict[str, Any], key: str, wants_key: bool) -> Any:
    kwargs = dict(args)
    if wants_key:
        kwargs["idempotency_key"] = key
    out = await fn(**kwargs) if inspect.iscoroutinefunction(fn) else await asyncio.to_thread(fn, **kwargs)
    # Outputs go into checkpoints and templates: keep them plain JSON.
    return json.loads(json.dumps(out, default=str))


def _import(module_name: str, base: Path) -> ModuleType:
    """A module beside the workflow loads under a name unique to that folder, so two workflows' ``tools.py``
    never shadow each other in one process; anything else imports normally.

    While it loads, its folder comes first on ``sys.path``, as a script's folder does: its own imports
    (``import helpers``, or a ``bot.py`` of the user's) find the files beside it. Ours live under ``hitl`` only,
    so nothing of the user's is shadowed by us, nor ours by theirs. Afterwards the folder stays at the *end* of
    ``sys.path``, so an import a tool makes later, at call time, still finds its neighbours without letting
    them shadow an installed package another part of the process imports later."""
    local = base.joinpath(*module_name.split("."))
    file = local.with_suffix(".py") if local.with_suffix(".py").is_file() else local / "__init__.py"
    if not file.is_file():
        return importlib.import_module(module_name)
    unique = f"_hitl_tools_{hashlib.sha256(str(file).encode()).hexdigest()[:12]}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    folder = str(base.resolve())
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    finally:
        sys.path.remove(folder)  # the first occurrence: the one inserted above
        if folder not in sys.path:
            sys.path.append(folder)
    return module


def load_tools(defs: dict[str, ToolDef], *, base: Path) -> dict[str, Tool]:
    """Import every tool; modules resolve from the workflow's folder first."""
    tools: dict[str, Tool] = {}
    for name, d in defs.items():
        fn = _resolve(name, d.function, base)
        hook = _resolve(name, d.reconcile, base) if d.reconcile else None
        try:
            schema = ToolSchema(name, d.schema_ if d.schema_ is not None else signature_schema(name, fn))
        except InvalidInput as exc:
            raise EngineError(exc.message, code=ErrorCode.WORKFLOW_INVALID, tool=name) from None
        tools[name] = Tool(name, fn, schema, idempotent=d.idempotent, reconcile=hook)
    return tools


def _resolve(tool: str, path: str, base: Path) -> Callable[..., Any]:
    module_name, _, attr = path.partition(":")
    try:
        fn = getattr(_import(module_name, base), attr)
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise EngineError(
            f"tool {tool}: cannot import {path} ({exc}); check the module path relative to {base}",
            code=ErrorCode.WORKFLOW_INVALID,
            tool=tool,
        ) from None
    if not callable(fn):
        raise EngineError(f"tool {tool}: {path} is not callable", code=ErrorCode.WORKFLOW_INVALID)
    return fn  # type: ignore[no-any-return]
