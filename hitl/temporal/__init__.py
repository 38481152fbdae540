"""Approvals inside Temporal workflows: :func:`require_approval` / :func:`run_approved` in workflow code,
:class:`HitlActivities` and :class:`TemporalResumer` on the worker."""

from .activities import FRAMEWORK, HitlActivities, TemporalResumer
from .messages import Decision
from .workflow import require_approval, run_approved

__all__ = ["FRAMEWORK", "Decision", "HitlActivities", "TemporalResumer", "require_approval", "run_approved"]
