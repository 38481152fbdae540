"""How long a delegation may last, apart from the delegation rules: ``hitl --help`` names the bound without loading
them (and pydantic with them)."""

from __future__ import annotations

__all__ = ["MAX_DAYS"]

MAX_DAYS = 30
"""The longest a delegation may last, in days (an absence longer than this is a change to ``hitl.yaml``)."""
