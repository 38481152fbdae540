"""The model an agent runs on, from the workflow's ``runtime:`` (credentials only from the environment)."""

from __future__ import annotations

import importlib
from typing import Any

from strands.models.model import Model

from hitl.agent_backends.scripted import ScriptedModel, load_script
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.runner.agent_backend import ModelChoice

__all__ = ["PROVIDERS", "build_model"]

PROVIDERS: dict[str, tuple[str, str, str]] = {
    "bedrock": ("strands.models.bedrock", "BedrockModel", "strands-agents"),
    "openai": ("strands.models.openai", "OpenAIModel", "strands-agents[openai]"),
    "anthropic": ("strands.models.anthropic", "AnthropicModel", "strands-agents[anthropic]"),
    "ollama": ("strands.models.ollama", "OllamaModel", "strands-agents[ollama]"),
    "litellm": ("strands.models.litellm", "LiteLLMModel", "strands-agents[litellm]"),
}
"""provider: (module, class, what to install). ``params`` are passed to the class as keyword arguments."""


def build_model(choice: ModelChoice, *, agent: str, iteration: int) -> Model:
    """The Strands model a workflow's ``runtime.model`` names (the scripted model offline)."""
    if choice.provider == "scripted":
        if choice.script is None:
            raise EngineError("the scripted provider needs runtime.script", code=ErrorCode.WORKFLOW_INVALID)
        return ScriptedModel(load_script(choice.script), agent, iteration)
    found = PROVIDERS.get(choice.provider)
    if found is None:
        known = ", ".join(["scripted", *PROVIDERS])
        raise EngineError(
            f"unknown model provider {choice.provider!r}; use one of {known}", code=ErrorCode.WORKFLOW_INVALID
        )
    module, name, extra = found
    try:
        cls: Any = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise EngineError(
            f"the {choice.provider} provider needs `pip install '{extra}'` ({exc})", code=ErrorCode.WORKFLOW_INVALID
        ) from None
    kwargs = dict(choice.params)
    if choice.model_id:
        kwargs["model_id"] = choice.model_id
    if choice.provider == "ollama":
        return cls(kwargs.pop("host", None), **kwargs)  # type: ignore[no-any-return]
    return cls(**kwargs)  # type: ignore[no-any-return]
