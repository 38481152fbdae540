"""``/approvals/{id}/withdrawal``: one of an approval's deciders, or an admin token, withdraws it while its receipts
are unspent; from then on every receipt of it fails redeem (409 ``withdrawn``) and introspects as ``withdrawn``.
The store's atomic step decides it against any redeem at once (exactly one wins), and the trail records it before
the answer. The card is then queued to be drawn again (durably, before the answer), as the Slack form's
withdrawal queues it: a withdrawal makes no new version of the approval to bring its card up to date."""

from __future__ import annotations

import logging

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError
from hitl.engine.receipts.withdrawing import WithdrawRequest, withdraw_approval

from .context import CONTEXT, ApiContext, body_of, caller_of
from .problems import ApiError, from_engine
from .receipt_models import WithdrawalRequest, Withdrawn
from .routes import Endpoint

__all__ = ["routes"]

log = logging.getLogger(__name__)


async def withdraw(request: web.Request) -> web.Response:
    """Withdraw an approval whose receipts are unspent (a decider of it, or an admin)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.DECIDE)
    body = await body_of(request, WithdrawalRequest)
    if ctx.receipt_keys is None:
        raise ApiError(
            404, "not_found", "this deployment issues no receipts (receipts: in hitl.yaml): none to withdraw"
        )
    approval = await ctx.visible(caller, request.match_info["id"], acting=True)
    admin = caller.may(Scope.ADMIN)
    asked = WithdrawRequest(approval.id, caller.reviewer, caller.via, body.reason, admin=admin, roles=caller.roles)
    try:
        done = await withdraw_approval(ctx.lifecycle.store, ctx.lifecycle.contexts.clock, asked)
    except EngineError as exc:
        raise from_engine(exc) from None
    await _redraw(ctx, done)
    return web.json_response(Withdrawn(approval_id=approval.id).model_dump(mode="json"))


async def _redraw(ctx: ApiContext, approval: Approval) -> None:
    """Queue ``approval``'s card update through the notifier's card-update worker (its durable job, claimed once and
    paced as every card update is), so the card says who withdrew it and why and offers Withdraw no more. After the
    withdrawal is recorded, so a failure here is logged, never answered: the withdrawal stands."""
    notifier = ctx.lifecycle.contexts.default.service.notifier
    if notifier is None:  # no Slack in this process: no card to draw
        return
    try:
        await notifier.approval_changed(approval)
    except Exception:
        log.exception("could not queue the card update of %s after its withdrawal", approval.id)


def routes() -> list[Endpoint]:
    """The withdrawal route."""
    return [
        Endpoint(
            "POST", "/approvals/{id}/withdrawal", withdraw, Withdrawn, (403, 404, 409, 422), body=WithdrawalRequest
        )
    ]
