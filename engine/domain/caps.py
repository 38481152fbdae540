"""Caps on how many approvals may be asked for, opt-in: a flood becomes a coded, retryable refusal instead of a
queue no person can take in (OWASP's agentic threat T10, "overwhelming human-in-the-loop").

``policy.caps`` in ``hitl.yaml`` caps the approvals created per requester, per session and per tool in a rolling
window; each is off unless set. Pure: the service counts in the store's rolling windows (one atomic step per cap,
so concurrent proposals cannot both take the last place) and refuses the excess with ``approval_flood``.
Practice approvals and spot checks are created apart from proposals and never count.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.durations import Seconds

__all__ = ["CapSpec", "CapsSpec", "cap_keys"]


class CapSpec(BaseModel):
    """At most ``max`` approvals created in any ``per`` (a duration such as ``10m``, or seconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max: int = Field(ge=1)
    per: Seconds = Field(gt=0)


class CapsSpec(BaseModel):
    """``policy.caps``: each cap off unless set."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    requester: CapSpec | None = None
    """Approvals one requester (an agent's identity) may have created in the window."""
    session: CapSpec | None = None
    """Approvals one session may have created in the window."""
    tool: CapSpec | None = None
    """Approvals for one tool, whoever asks, in the window."""

    @property
    def on(self) -> bool:
        """Whether any cap is set (with none, nothing is counted)."""
        return self.requester is not None or self.session is not None or self.tool is not None


def cap_keys(caps: CapsSpec, *, requester: str, session_id: str, tool: str) -> list[tuple[str, str, CapSpec]]:
    """Each cap that applies: ``(what it caps, its window key, the cap)``."""
    named = (("requester", requester, caps.requester), ("session", session_id, caps.session), ("tool", tool, caps.tool))
    return [(what, f"cap:{what}:{value}", cap) for what, value, cap in named if cap is not None]
