"""The steps a workflow is made of: tool calls, review gates and agent runs, and the tools they use."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from hitl.engine.domain.arg_schema import declared_schema
from hitl.engine.domain.durations import Seconds
from hitl.engine.domain.policy_spec import ToolPolicySpec

__all__ = ["ID_PATTERN", "AgentStep", "GateStep", "LoopSpec", "Spec", "Step", "ToolDef", "ToolStep", "step_kind"]

ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$"


class Spec(BaseModel):
    """A part of a workflow file: unknown keys are errors (a typo must not silently change behaviour)."""

    # Built when a workflow is first read, not at import (defer_build): most processes that import the engine (a
    # `hitl` command, `hitl serve` with no workflow run to resume) never read one, and building every part of a
    # workflow cost each of them about 40 ms of CPU.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ToolDef(Spec):
    """A tool: a Python callable by import path, its argument schema, and (optionally) its policy."""

    function: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``module:attribute``; modules resolve from the workflow's folder first."""
    description: str = ""
    """What the tool does: agents read it to decide when to call it."""
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


class LoopSpec(Spec):
    """Repeat a step until ``until`` holds; after ``review_after`` iterations a reviewer looks."""

    until: str
    max: int = Field(default=5, ge=1, le=100)
    review_after: int | None = Field(default=None, ge=1)


class ToolStep(Spec):
    """Call one tool with rendered arguments (through the policy, and a person when it says so)."""

    id: str = Field(pattern=ID_PATTERN)
    type: Literal["tool"] = "tool"
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    evidence: str = ""
    """Untrusted text shown to reviewers (redacted, escaped, bounded)."""
    approval: Literal["policy", "required"] = "policy"
    for_each: str | None = None
    """Batch: an expression giving a list; one approval covers the exact ordered items."""
    as_: str = Field(default="item", alias="as", pattern=ID_PATTERN)
    repeat: LoopSpec | None = None
    timeout: Seconds | None = None
    depends_on: tuple[str, ...] = ()
    """``workflow`` pattern only: the steps that must finish first."""


class GateStep(Spec):
    """A human review gate: approve, reject, feedback (re-run the previous step) or defer."""

    id: str = Field(pattern=ID_PATTERN)
    type: Literal["gate"]
    prompt: str
    preview: str = ""
    """Template for what the reviewer reads, e.g. ``{{ steps.draft.response }}``."""
    preview_length: int = Field(default=1500, ge=50, le=2900)
    condition: str | None = None
    """Expression: the gate asks only when it holds (otherwise it is recorded as skipped)."""
    role: str | None = None
    timeout: Seconds | None = None
    fallback: Literal["cancel", "continue"] = "cancel"
    """What an expired gate does: stop the run, or go on as if approved (recorded as expired)."""
    depends_on: tuple[str, ...] = ()


class AgentStep(Spec):
    """Run one of the workflow's agents on a rendered input; its tool calls go through the policy one by one."""

    id: str = Field(pattern=ID_PATTERN)
    type: Literal["agent"] = "agent"
    agent: str
    input: str
    """Template: the message the agent is given (``{{ vars.topic }}``, ``{{ steps.research.response }}``)."""
    approval: Literal["policy", "required"] = "policy"
    """``required``: every tool call this step's agent makes waits for a person, whatever the policy's tier."""
    timeout: Seconds | None = None
    """How long each of its tool approvals stays open."""
    depends_on: tuple[str, ...] = ()


def step_kind(value: Any) -> str | None:
    """Which kind of step a mapping is: its ``type``, else ``agent`` or ``tool`` by the key it has."""
    if isinstance(value, BaseModel):
        return str(getattr(value, "type", ""))
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if isinstance(kind, str):
        return kind
    return "agent" if "agent" in value else "tool"


Step = Annotated[
    Annotated[ToolStep, Tag("tool")] | Annotated[GateStep, Tag("gate")] | Annotated[AgentStep, Tag("agent")],
    Discriminator(
        step_kind,
        custom_error_type="step_type",
        custom_error_message="a step's type is tool, gate or agent (or give it `tool:` or `agent:`)",
    ),
]
"""Any step; its kind comes from ``type`` (``tool``, ``gate``, ``agent``) or from its ``tool:``/``agent:`` key."""
