"""The agents a workflow declares, and the model runtime they run on."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from hitl.engine.domain.arg_schema import declared_schema
from hitl.engine.workflow.steps import Spec

__all__ = ["AgentDef", "ModelSpec", "RuntimeSpec"]

# Credentials come only from the environment (or the provider's own credential chain): a workflow file is shared,
# committed and shown to reviewers, so a key-like parameter in it is refused rather than used.
_SECRET = re.compile(r"(api_?key|secret|token|password|credential|auth)", re.IGNORECASE)


def _no_secrets(params: dict[str, Any]) -> dict[str, Any]:
    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if _SECRET.search(str(k)):
                    raise ValueError(
                        f"{where}{k}: credentials are read from the environment only (for example OPENAI_API_KEY, "
                        "AWS_PROFILE); remove it from the workflow file"
                    )
                walk(v, f"{where}{k}.")

    walk(params, "params.")
    return params


class ModelSpec(Spec):
    """A model: provider, model id and parameters; an agent's ``model:`` overrides the runtime's fields it names."""

    provider: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,31}$")
    """``scripted`` (replays ``script``, offline), ``bedrock``, ``openai``, ``anthropic``, ``ollama``, ``litellm``."""
    model_id: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    """Passed to the provider's model (``temperature``, ``max_tokens``, ``region_name``, ``host``...)."""

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _no_secrets(v)


class RuntimeSpec(ModelSpec):
    """The workflow's model runtime: every agent uses it unless its own ``model:`` says otherwise."""

    provider: str | None = Field(default="scripted", pattern=r"^[a-z][a-z0-9_]{0,31}$")
    script: str | None = None
    """``scripted`` only: a YAML file (relative to the workflow) of each agent's replies and tool calls."""


class AgentDef(Spec):
    """An agent: its system prompt, the workflow tools it may call, and optionally its model and output schema."""

    prompt: str
    """System prompt (a template: ``{{ vars.topic }}``)."""
    tools: tuple[str, ...] = ()
    """Names from the workflow's ``tools:``; each call goes through the policy and, when it says so, a person."""
    model: ModelSpec | None = None
    output_schema: dict[str, Any] | None = None
    """JSON Schema: the agent's final answer must be one JSON object that satisfies it (``steps.<id>.output``)."""
    max_turns: int = Field(default=20, ge=1, le=200)
    """Model turns one run of the agent may take; more stops the step as failed."""

    @field_validator("output_schema")
    @classmethod
    def _json_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else declared_schema(v)
