"""``hitl withdraw APPROVAL --reason TEXT``: a decider takes back an approval whose receipts are unspent, so the
protected system refuses them (409 ``withdrawn`` on redeem; ``withdrawn`` on introspection). Through the API with a
token (``HITL_API_URL`` and ``HITL_TOKEN``; an admin token may withdraw any), or against the store as ``--as``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.as_reviewer import ApiCall, Ways, as_reviewer

if TYPE_CHECKING:
    from hitl.api.receipt_models import Withdrawn
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import Runtime

__all__ = ["withdraw"]


@as_reviewer("withdraw")
def withdraw(
    approval: Annotated[str, typer.Argument(help="The approval's id.", show_default=False)],
    reason: Annotated[str, typer.Option("--reason", help="Why it must not be acted on (kept in its audit trail).")],
) -> Ways[Any]:
    """Withdraw an approval you decided while its receipts are unspent: they are refused from now on (audited)."""
    from hitl.api.receipt_models import Withdrawn
    from hitl.engine.receipts.withdrawing import WithdrawRequest, withdraw_approval

    async def local(rt: Runtime, who: str) -> Withdrawn:
        done = await withdraw_approval(rt.store, rt.clock, WithdrawRequest(approval, who, "cli", reason))
        notifier = rt.contexts.default.service.notifier
        if notifier is not None:  # a withdrawal makes no new version: its card is queued to be drawn, as any change
            await notifier.approval_changed(done)
        return Withdrawn(approval_id=done.id)

    def show(out: Out, done: Withdrawn) -> None:
        if out.json:
            out.emit(done.model_dump())
        else:
            out.text(("withdrawn", "bold"), f"  {done.approval_id}: its receipts are refused from now on")

    path = f"/approvals/{approval}/withdrawal"
    return Ways(ApiCall("POST", path, read=Withdrawn.model_validate, json={"reason": reason}), local, show)
