"""Workflow files (YAML), validated by pydantic; errors name the file, line and field."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine._yaml import parse_model
from engine.domain.arg_schema import declared_schema
from engine.domain.durations import Seconds
from engine.domain.policy_spec import ToolPolicySpec
from engine.errors import EngineError, ErrorCode

__all__ = ["GateStep", "LoopSpec", "ToolDef", "ToolStep", "Workflow", "load_workflow"]

_ID = r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolDef(_Spec):
    """A tool: a Python callable by import path, its argument schema, and (optionally) its policy."""

    function: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``module:attribute``; modules resolve from the workflow's folder first."""
    description: str = ""
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    """JSON Schema of the arguments; without it the schema is derived from the function's signature."""

    @field_validator("schema_")
    @classmethod
    def _json_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else declared_schema(v)

    policy: ToolPolicySpec | None = None
    """Used when hitl.yaml says nothing about this tool; hitl.yaml always wins."""
    idempotent: bool = False
    """The tool honours ``idempotency_key`` (like Stripe's API): after a crash mid-effect it may simply run again."""
    reconcile: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``module:callable`` that says whether a lost attempt happened (``{"done": bool, "output": ...}``).
    Without either, an effect whose outcome was lost in a crash is put to a person."""


class LoopSpec(_Spec):
    """Repeat a step until ``until`` holds; after ``review_after`` iterations a reviewer looks."""

    until: str
    max: int = Field(default=5, ge=1, le=100)
    review_after: int | None = Field(default=None, ge=1)


class ToolStep(_Spec):
    id: str = Field(pattern=_ID)
    type: Literal["tool"] = "tool"
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    evidence: str = ""
    """Untrusted text shown to reviewers (redacted, escaped, bounded)."""
    approval: Literal["policy", "required"] = "policy"
    for_each: str | None = None
    """Batch: an expression giving a list; one approval covers the exact ordered items."""
    as_: str = Field(default="item", alias="as", pattern=_ID)
    repeat: LoopSpec | None = None
    timeout: Seconds | None = None


class GateStep(_Spec):
    """A human review gate: approve, reject, feedback (re-run the previous step) or defer."""

    id: str = Field(pattern=_ID)
    type: Literal["gate"]
    prompt: str
    preview: str = ""
    """Template for what the reviewer reads, e.g. ``{{ steps.draft.output.text }}``."""
    preview_length: int = Field(default=1500, ge=50, le=2900)
    condition: str | None = None
    role: str | None = None
    timeout: Seconds | None = None
    fallback: Literal["cancel", "continue"] = "cancel"


class Workflow(_Spec):
    name: str = Field(pattern=r"^[\w.\-]{1,64}$")
    version: int | str = 1
    vars: dict[str, Any] = Field(default_factory=dict)
    """Variables with their defaults; ``null`` means the variable must be given with --var."""
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    steps: list[ToolStep | GateStep] = Field(min_length=1)
    config: str | None = None
    """Path of hitl.yaml, relative to this file (default: hitl.yaml beside it, if present)."""

    @model_validator(mode="after")
    def _references(self) -> Workflow:
        seen: set[str] = set()
        for i, step in enumerate(self.steps):
            if step.id in seen:
                raise ValueError(f"steps[{i}]: step id {step.id!r} is used twice")
            seen.add(step.id)
            if isinstance(step, ToolStep) and step.tool not in self.tools:
                known = ", ".join(sorted(self.tools)) or "none"
                raise ValueError(f"steps[{i}] ({step.id}): unknown tool {step.tool!r}; tools defined: {known}")
            if isinstance(step, ToolStep) and step.for_each and step.repeat:
                raise ValueError(f"steps[{i}] ({step.id}): a step cannot be both for_each and repeat")
        return self


class LoadedWorkflow(BaseModel):
    """A workflow with where it came from and the hashes resume compares."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    spec: Workflow
    path: Path
    spec_hash: str
    step_hashes: dict[str, str]


_STAT: dict[str, tuple[tuple[int, int, int], LoadedWorkflow]] = {}
_LOADED: dict[tuple[str, str], LoadedWorkflow] = {}


def load_workflow(path: str | Path) -> LoadedWorkflow:
    """Read and validate a workflow file. A file whose ``stat`` (size, modification time, inode) is what it was at
    the last load in this process is not read again; otherwise it is read and hashed (resume compares the hash),
    and parsed only when its content changed."""
    p = Path(path).resolve()
    try:
        st = p.stat()
        seen = _STAT.get(str(p))
        # A file changed within the clock's granularity could change again with the same stat ("racy git"): only
        # a file older than that is trusted by its stat.
        settled = time.time_ns() - st.st_mtime_ns > 2_000_000_000
        if seen is not None and settled and seen[0] == (st.st_size, st.st_mtime_ns, st.st_ino):
            return seen[1]
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise EngineError(
            f"cannot read workflow {path}: {exc.strerror or exc}; check the path", code=ErrorCode.WORKFLOW_INVALID
        ) from None
    loaded = _parse(p, text, path)
    if len(_STAT) > 256:
        _STAT.clear()
    _STAT[str(p)] = ((st.st_size, st.st_mtime_ns, st.st_ino), loaded)
    return loaded


def _parse(p: Path, text: str, path: str | Path) -> LoadedWorkflow:
    digest = hashlib.sha256(text.encode()).hexdigest()
    cached = _LOADED.get((str(p), digest))
    if cached is not None:
        return cached
    spec = parse_model(text, Workflow, code=ErrorCode.WORKFLOW_INVALID, what="workflow", source=str(path))
    steps = {s.id: _digest(s.model_dump(mode="json", by_alias=True)) for s in spec.steps}
    steps.update({f"tool:{n}": _digest(t.model_dump(mode="json", by_alias=True)) for n, t in spec.tools.items()})
    steps["vars"] = _digest(spec.vars)
    loaded = LoadedWorkflow(spec=spec, path=p, spec_hash=digest, step_hashes=steps)
    if len(_LOADED) > 256:
        _LOADED.clear()
    _LOADED[(str(p), digest)] = loaded
    return loaded


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def describe_changes(old: dict[str, str], new: dict[str, str]) -> str:
    """Words for what changed between two step-hash maps (for resume's refusal)."""
    changed = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
    added = sorted(new.keys() - old.keys())
    removed = sorted(old.keys() - new.keys())
    parts = []
    if changed:
        parts.append("changed: " + ", ".join(changed))
    if added:
        parts.append("added: " + ", ".join(added))
    if removed:
        parts.append("removed: " + ", ".join(removed))
    return "; ".join(parts) or "formatting only"
