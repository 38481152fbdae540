"""Argument specs: the typed vocabulary tool schemas are written in (compiled by ``engine.runner.schema``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ArgSpec"]


class ArgSpec(BaseModel):
    """One argument's type and limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["string", "number", "integer", "boolean", "object", "array"] = "string"
    description: str = ""
    required: bool = True
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = Field(default=None, ge=1, le=3000)
    enum: list[str] | None = None
    multiline: bool = False
