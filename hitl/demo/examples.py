"""Where the bundled refund example lives: beside the source tree (a checkout or an editable install), or
under the working directory (the Docker image keeps it in /app/examples)."""

from __future__ import annotations

from pathlib import Path

from engine.errors import EngineError, ErrorCode

__all__ = ["refund_example"]


def refund_example() -> Path:
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        candidate = base / "examples" / "refund"
        if (candidate / "workflow.yaml").is_file():
            return candidate
    raise EngineError(
        "the refund example (examples/refund) was not found; run from a checkout of hitl or from /app in the image",
        code=ErrorCode.WORKFLOW_INVALID,
    )
