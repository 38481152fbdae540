"""The bodies and answers of ``/proposals``, ``/executions`` and ``/receipts``: a proposed call and the policy's
verdict, the claim of an approved call's one execution (by the agent, or by another process with its receipt), its
outcome, and a receipt spent."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .models import ApprovalView, Args, Id, RequestModel, ResponseModel, Text

__all__ = [
    "AllowedReceiptRequest",
    "AllowedReceiptView",
    "ClaimRequest",
    "ClaimView",
    "ExecutionClaim",
    "OutcomeRequest",
    "ProposalRequest",
    "ProposalView",
    "ReceiptClaimRequest",
    "ReceiptClaimView",
    "RedeemRequest",
    "Redeemed",
]


class ProposalRequest(RequestModel):
    """A proposed tool call, checked by the policy (and the tool's schema) before anything is stored."""

    session: Id
    tool: str = Field(min_length=1, max_length=128)
    args: Args
    idempotency_key: Id
    """The caller's id for this one call: asking again with the same key re-attaches to the same approval."""
    evidence: Text = ""
    agent: Annotated[str, Field(max_length=120)] | None = None
    args_schema: dict[str, Any] | None = None
    """The tool's JSON Schema (for a typed Modify form, and to validate edits)."""


class ProposalView(ResponseModel):
    """The policy's verdict on a proposal: run now, denied, or pending a person's decision."""

    verdict: Literal["run", "deny", "pending"]
    """``run``: execute now with ``args``; ``deny``: do not (``message`` says why); ``pending``: wait."""
    args: Args
    """What to run (a reviewer's edit included), when ``verdict`` is ``run``."""
    message: str | None
    code: str | None
    approval: ApprovalView | None
    execution_key: str | None
    """Claim this before running an approved call (``POST /executions/{key}/claim``); null when no approval."""
    receipt: str | None = None
    """For ``run`` without an approval, of a tool whose receipts come ``always`` (``receipts:`` in hitl.yaml): the
    signed receipt (``basis`` ``policy`` or ``trust``) the protected system checks. Null otherwise."""


class ClaimRequest(RequestModel):
    """A claim of an approved call's one execution, bound to the hash of what is about to run."""

    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The hash of exactly what is about to run: the approval's ``execute_hash``."""
    lease: float = Field(default=300.0, gt=0, le=86400)
    """Seconds the claim stays yours; a claim not finished in time is recovered as "in doubt", never re-run."""


class ClaimView(ResponseModel):
    """Whether this caller holds the execution, and the arguments to run it with."""

    key: str
    acquired: bool
    args: Args
    """Run exactly these."""
    approval: ApprovalView
    receipt: str | None = None
    """The signed receipt for this execution (``receipts:`` in hitl.yaml): pass it to the protected system, which
    checks it (``hitl.receipts.verify``) and spends it once (``POST /receipts/redeem``). Null when none is issued."""


class ReceiptClaimRequest(RequestModel):
    """Another process's claim of an approved execution with its receipt (``hitl serve`` holds the key)."""

    key: Annotated[str, Field(min_length=6, max_length=210, pattern=r"^call:[^\x00-\x1f\x7f]+$")]
    """The execution's key: ``call:`` and the approval's id."""
    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The hash of exactly what is about to run: the approval's ``execute_hash``."""
    holder: Id
    """The claiming process's name: it renews the claim and records the outcome in the store under it."""
    lease: float = Field(default=300.0, gt=0, le=86400)
    retry_failed: bool = False
    """A failed attempt may be claimed again (a run driven again); otherwise it is final."""


class AllowedReceiptRequest(RequestModel):
    """Another process's call that runs without a person, of a tool whose receipts come ``always``."""

    tool: str = Field(min_length=1, max_length=128)
    args: Args
    session: Id
    scope: Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")]
    """The proposal's dedupe scope (the gate's ``framework:session:call id``)."""
    requester: Id | None = None
    """Whose call it is: with the ``claim`` scope, the requester the process asks for; otherwise the token's own
    identity (another is refused)."""


class AllowedReceiptView(ResponseModel):
    """The receipt of a call that runs without a person, and why it may (hitl serve's own finding)."""

    receipt: str
    basis: Literal["policy", "trust"]


class ExecutionClaim(ResponseModel):
    """An execution claim, as the store's ledger answered it."""

    key: str
    action_hash: str
    holder: str
    attempt: int
    state: str
    lease_until: float
    result: dict[str, Any] | None = None
    """The recorded outcome of an earlier attempt (``{"output": ...}`` or ``{"error": ...}``)."""
    acquired: bool
    """The holder now holds the claim and runs the effect."""
    recovered: bool
    """The claim was taken over from a holder that stopped: the effect is in doubt."""


class ReceiptClaimView(ResponseModel):
    """The claim, and the receipt issued in its atomic step (null unless acquired for a new attempt)."""

    claim: ExecutionClaim
    receipt: str | None = None


class RedeemRequest(RequestModel):
    """Spend a receipt: the protected system's one use of it."""

    receipt: str = Field(min_length=20, max_length=5_000, pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
    """The compact JWS as the agent passed it (three base64url parts; a receipt is under 2 kB). Bounded so that even
    a body of the longest JSON-escaped string stays under ``api.max_body``, and is refused by its schema (422)."""
    redemption: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None
    """The caller's id for this use: redeeming again under the same id (a retry after a timeout) answers 200 again;
    without one, every redeem after the first is refused."""


class Redeemed(ResponseModel):
    """A receipt spent (or, under the same redemption id, spent before by this use): act on it."""

    jti: str
    sub: str
    tool: str
    first: bool
    """False when this redemption id spent it before (a retry): act as the first answer said."""
    claims: dict[str, Any]


class OutcomeRequest(RequestModel):
    """How a claimed execution went."""

    ok: bool
    detail: Text = ""
