"""``/approvals/{id}/evidence``: the durable evidence record of an executed approval, for an auditor to keep and
verify offline: signed by ``hitl serve`` (``typ: hitl-evidence+jwt``, no ``exp``), checked with the keys history
(``/.well-known/jwks-history.json``), which keeps publishing a key after it is rotated out."""

from __future__ import annotations

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.receipts.evidence import evidence_claims, evidence_problem
from hitl.receipts.publishing import KEYS_HISTORY_PATH

from .context import CONTEXT, caller_of
from .problems import ApiError
from .receipt_models import EvidenceView
from .routes import Endpoint

__all__ = ["TRAIL_READ", "routes"]

TRAIL_READ = 5000
"""The most audit entries of one approval read for its record. A longer trail (refused clicks are audited under
their approval) is not read in part: a record signed from its first entries could leave out a receipt issued later."""


async def evidence(request: web.Request) -> web.Response:
    """The signed evidence record of an executed approval (never expires)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    config = ctx.config.current()[0]
    if ctx.signing is None or config.receipts is None:
        raise ApiError(404, "not_found", "this deployment signs no evidence (receipts: in hitl.yaml)")
    approval = await ctx.visible(caller, request.match_info["id"])
    problem = evidence_problem(approval)
    if problem is not None:
        raise ApiError(409, "not_executed", f"{problem}; ask again once it has run")
    trail = await ctx.lifecycle.store.audit.entries(approval_id=approval.id, limit=TRAIL_READ + 1)
    if len(trail) > TRAIL_READ:
        raise ApiError(
            409,
            "trail_too_long",
            f"{approval.id}'s audit trail holds more than {TRAIL_READ} entries, so no record of it is signed (one "
            "read in part could leave out a receipt); export its trail with `hitl audit --json` and keep that",
        )
    now = ctx.lifecycle.contexts.clock.now()
    claims = evidence_claims(approval, trail, issuer=config.receipts.issuer, now=now)
    view = EvidenceView(
        approval_id=approval.id,
        evidence=ctx.signing.sign_evidence(claims),
        keys_history=f"{config.receipts.issuer}{KEYS_HISTORY_PATH}",
    )
    return web.json_response(view.model_dump(mode="json"))


def routes() -> list[Endpoint]:
    """The evidence route."""
    return [Endpoint("GET", "/approvals/{id}/evidence", evidence, EvidenceView, (403, 404, 409))]
