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
from typing import Any

from engine.errors import EngineError, ErrorCode
from engine.runner.schema import ToolSchema
from engine.runner.spec import ToolDef

__all__ = ["Tool", "load_tools"]


class Tool:
    """A callable with its schema. Receives ``idempotency_key=`` when its signature accepts it."""

    def __init__(self, name: str, fn: Callable[..., Any], schema: ToolSchema | None) -> None:
        self.name = name
        self.fn = fn
        self.schema = schema or ToolSchema(name, {}, open_=True)
        params = inspect.signature(fn).parameters
        self._wants_key = "idempotency_key" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())

    async def __call__(self, args: dict[str, Any], *, idempotency_key: str) -> Any:
        kwargs = dict(args)
        if self._wants_key:
            kwargs["idempotency_key"] = idempotency_key
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(**kwargs)
        else:
            out = await asyncio.to_thread(self.fn, **kwargs)
        # Outputs go into checkpoints and templates: keep them plain JSON.
        return json.loads(json.dumps(out, default=str))


def _import(module_name: str, base: Path) -> ModuleType:
    """A module beside the workflow loads under a name unique to that folder, so two workflows' ``tools.py``
    never shadow each other in one process; anything else imports normally."""
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
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def load_tools(defs: dict[str, ToolDef], *, base: Path) -> dict[str, Tool]:
    """Import every tool; modules resolve from the workflow's folder first."""
    tools: dict[str, Tool] = {}
    for name, d in defs.items():
        module_name, _, attr = d.function.partition(":")
        try:
            module = _import(module_name, base)
            fn = getattr(module, attr)
        except (ImportError, AttributeError, SyntaxError) as exc:
            raise EngineError(
                f"tool {name}: cannot import {d.function} ({exc}); check the module path relative to {base}",
                code=ErrorCode.WORKFLOW_INVALID,
                tool=name,
            ) from None
        if not callable(fn):
            raise EngineError(f"tool {name}: {d.function} is not callable", code=ErrorCode.WORKFLOW_INVALID)
        tools[name] = Tool(name, fn, ToolSchema(name, d.schema_))
    return tools
