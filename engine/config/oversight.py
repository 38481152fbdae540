"""The ``oversight:`` section of ``hitl.yaml``: who may stop the system (``hitl halt``) and start it again."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["OversightSpec"]


class OversightSpec(BaseModel):
    """Oversight settings.

    ``admin_role``: the role (under ``roles:``) whose members may halt and unhalt from Slack (``/hitl halt``) and
    the CLI. API tokens need the ``admin`` scope instead. With no such role defined, nobody may from Slack, and the
    CLI (which holds the store anyway) may.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    admin_role: str = Field(default="admin", min_length=1, max_length=100)
