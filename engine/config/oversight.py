"""The ``oversight:`` section of ``hitl.yaml``: who may stop the system (``hitl halt``) and start it again, and the
spot checks of what ran without a person."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hitl.engine.config.deprecations import warn_renamed
from hitl.engine.domain.practice import PracticeSpec
from hitl.engine.domain.spot_checks import SpotCheckSpec

__all__ = ["OversightSpec"]


class OversightSpec(BaseModel):
    """Oversight settings.

    ``admin_role``: the role (under ``roles:``) whose members may halt and unhalt from Slack (``/hitl halt``) and
    the CLI. API tokens need the ``admin`` scope instead. With no such role defined, nobody may from Slack, and the
    CLI (which holds the store anyway) may.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    admin_role: str = Field(default="admin", min_length=1, max_length=100)
    spot_check: SpotCheckSpec = Field(default_factory=SpotCheckSpec)
    """A sample of the actions that ran without a person, put to reviewers after the fact."""
    practice: PracticeSpec = Field(default_factory=PracticeSpec)
    """Practice approvals: real ones copied with one planted defect, to see whether reviews catch it."""

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        # ``seeded`` was this section's name until 0.2; it still works for one release, with a warning.
        if isinstance(data, dict) and "seeded" in data:
            if "practice" in data:
                raise ValueError("oversight.seeded is the old name of oversight.practice: keep only practice")
            warn_renamed("oversight.seeded", stacklevel=2)
            data = {("practice" if k == "seeded" else k): v for k, v in data.items()}
        return data
