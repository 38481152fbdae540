"""``hitl evidence APPROVAL``: an executed approval's durable evidence record (a JWS ``hitl serve`` signs, with no
expiry), for an auditor to keep and verify offline with the keys history. Through the API only (``HITL_API_URL``
and ``HITL_TOKEN``, a token with the read scope): only ``hitl serve`` holds the key that signs it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.as_reviewer import ApiCall, Ways, as_reviewer

if TYPE_CHECKING:
    from hitl.api.receipt_models import EvidenceView
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import Runtime

__all__ = ["evidence"]


@as_reviewer("evidence", read_only=True)
def evidence(
    approval: Annotated[str, typer.Argument(help="The executed approval's id.", show_default=False)],
) -> Ways[Any]:
    """Print an executed approval's signed evidence record, and where the keys that verify it are published."""
    from hitl.api.receipt_models import EvidenceView
    from hitl.engine.errors import EngineError, ErrorCode

    async def local(rt: Runtime, who: str) -> EvidenceView:
        raise EngineError(
            "only hitl serve signs evidence records: set HITL_API_URL and HITL_TOKEN (a token with the read scope) "
            "and run `hitl evidence` again",
            code=ErrorCode.RECEIPT_UNAVAILABLE,
        )

    def show(out: Out, view: EvidenceView) -> None:
        if out.json:
            out.emit(view.model_dump())
        else:
            out.text(view.evidence)
            out.text(f"verify with the keys at {view.keys_history} (keep a copy)")

    return Ways(ApiCall("GET", f"/approvals/{approval}/evidence", read=EvidenceView.model_validate), local, show)
