"""The ask API for agents: ask before a risky tool, get the decision from any channel.

    approvals = Approvals(service)
    answer = await approvals.ask("refund", {"order_id": "78291", "amount": 899},
                                 evidence=customer_message, session=run_id)
    if answer.approved:
        refund(**answer.args)          # the approved (possibly modified) arguments

Asking again for the same action in the same session re-attaches to the same approval, so a restarted
agent picks up the decision instead of asking twice. ``guard`` wraps a function so it runs only when
approved, exactly once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar

from engine.domain.hashing import action_hash
from engine.domain.models import Approval, Status
from engine.errors import EngineError, ErrorCode, IllegalTransition, StaleVersion
from engine.runner.effects import Effects
from engine.runner.tools import Tool
from engine.service import ApprovalService

__all__ = ["ActionRejected", "Answer", "Approvals"]

P = ParamSpec("P")
R = TypeVar("R")

Outcome = Literal["approved", "rejected", "expired", "cancelled"]

_FINAL: dict[Status, Outcome] = {
    Status.APPROVED: "approved",
    Status.EXECUTING: "approved",
    Status.EXECUTED: "approved",
    Status.FAILED: "approved",
    Status.REJECTED: "rejected",
    Status.EXPIRED: "expired",
    Status.CANCELLED: "cancelled",
}


@dataclass(frozen=True)
class Answer:
    """A decision, as the asking agent sees it."""

    status: Outcome
    args: dict[str, Any]
    """The arguments to run with (a reviewer may have modified them)."""
    approval: Approval | None = None
    """None when the policy let the action run without asking."""
    reason: str | None = None

    @property
    def approved(self) -> bool:
        return self.status == "approved"

    @property
    def modified(self) -> bool:
        return self.approval is not None and self.approval.approved_args is not None


class ActionRejected(EngineError):
    """A guarded call was not approved (rejected, expired, cancelled or denied)."""

    default_code = ErrorCode.ACTION_REJECTED


class Approvals:
    """Ask for approval and wait for the decision, whichever channel makes it.

    Args:
        service: the approval service (policy, store, reviewers).
        wait: default seconds to wait for a decision; the approval's own expiry always bounds it.
    """

    def __init__(self, service: ApprovalService, *, wait: float = 24 * 3600.0) -> None:
        self.svc = service
        self.wait_default = wait
        self.effects = Effects(service.store, service.clock, worker_id="ask")

    async def ask(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        session: str,
        evidence: str = "",
        requester: str | None = None,
        wait: float | None = None,
        dedupe_key: str | None = None,
    ) -> Answer:
        """Propose the action; return at once if the policy allows it, else wait for the decision."""
        prop = await self.svc.propose(
            tool, args, session_id=session, evidence=evidence, requester=requester, dedupe_key=dedupe_key
        )
        if prop.verdict.denied:
            return Answer("rejected", dict(args), reason=f"{tool} is denied by policy")
        if prop.approval is None:
            return Answer("approved", dict(args))
        return await self.wait(prop.approval, wait=wait)

    async def wait(self, approval: Approval, *, wait: float | None = None) -> Answer:
        """Wait until ``approval`` is decided (following supersessions) or expires. When ``wait`` passes first, the
        approval is cancelled (an agent that stopped waiting must not be approved behind its back)."""
        clock = self.svc.clock
        budget = self.wait_default if wait is None else wait
        deadline = clock.now() + budget
        while True:
            approval = await self.effects.follow(approval)
            if approval.status in _FINAL:
                return Answer(_FINAL[approval.status], approval.execute_args, approval, approval.reason)
            now = clock.now()
            if now >= approval.expires_at:
                await self.svc.expire_due()
                approval = await self.svc.store.approvals.get(approval.id)
                continue
            left = min(deadline, approval.expires_at) - now
            if left <= 0:
                # The agent stops waiting: it was told "no", so nobody may approve this any more. Close it (the
                # card says so, a late click is refused) unless a decision landed in the meantime.
                try:
                    closed = await self.svc.cancel(
                        approval.id,
                        actor=approval.requester,
                        reason=f"the agent stopped waiting after {budget:g} s",
                        expected_version=approval.version,
                    )
                except (StaleVersion, IllegalTransition):
                    approval = await self.svc.store.approvals.get(approval.id)
                    continue
                return Answer("cancelled", closed.execute_args, closed, closed.reason)
            approval = await self.svc.store.approvals.wait_changed(
                approval.id, after_version=approval.version, timeout=min(left, 60.0)
            )

    def guard(
        self, tool: str | None = None, *, session: str | Callable[..., str], evidence: str = ""
    ) -> Callable[[Callable[P, R] | Callable[P, Awaitable[R]]], Callable[P, Awaitable[Any]]]:
        """Run the decorated function only when approved, with the approved arguments, exactly once.

        The wrapper is always a coroutine function. Raises :class:`ActionRejected` when not approved.
        """

        def deco(fn: Callable[P, R] | Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[Any]]:
            name = tool or fn.__name__
            sig = inspect.signature(fn)
            runnable = Tool(name, fn, None)

            @functools.wraps(fn)
            async def wrapper(*a: P.args, **kw: P.kwargs) -> Any:
                bound = sig.bind(*a, **kw)
                bound.apply_defaults()
                args = {k: v for k, v in bound.arguments.items() if k != "idempotency_key"}
                sid = session(*a, **kw) if callable(session) else session
                answer = await self.ask(name, args, session=sid, evidence=evidence)
                if not answer.approved:
                    raise ActionRejected(
                        f"{name} was not approved ({answer.status}): {answer.reason or 'no reason'}",
                        status=answer.status,
                    )
                scope = answer.approval.id if answer.approval else f"{sid}:auto"
                key = f"{scope}:{action_hash(name, answer.args)[:16]}"
                return await self.effects.execute(runnable, answer.args, key=key, approval=answer.approval)

            return wrapper

        return deco
