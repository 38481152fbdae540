"""The bundled refund example (a workflow, its hitl.yaml and its tools), shipped inside the package so
``hitl demo`` works from an installed wheel; ``examples/refund`` in a checkout links to it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["refund_example"]


def refund_example() -> Path:
    """The example's folder (the workflow names its tools relative to it, so it must be a real folder)."""
    folder = Path(str(resources.files("hitl.demo").joinpath("refund")))
    if not (folder / "workflow.yaml").is_file():
        raise EngineError(
            f"the bundled refund example is missing from {folder}; reinstall hitl-gate",
            code=ErrorCode.WORKFLOW_INVALID,
        )
    return folder
