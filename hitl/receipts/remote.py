"""Receipts for a process that does not hold the key: it asks ``hitl serve`` to claim the execution and issue the
receipt in the claim's own atomic step (``POST /api/v1/receipts/claim``), then runs the effect under that claim as
it would have under its own. ``hitl serve`` signs the arguments the approval stands for, read from the store, never
ones this process sends. An HTTP client, so the composition root's: it hands :func:`receipt_claims_from_env` to the
engine as its :class:`~hitl.engine.receipts.ports.ReceiptsRemote` (the ``hitl`` commands, ``hitl.ApprovalService``).

Nothing fails open: ``hitl serve`` away, slow, or answering anything but a claim means the execution is not claimed
and nothing runs (``receipt_unavailable``). The standard library's client, in a thread, so an agent process that
only proposes and waits needs no HTTP package of ours.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import Claim
from hitl.engine.errors import ClaimRefused, EngineError, ErrorCode, Halted
from hitl.engine.receipts.claims import AllowedCall, Issued, Receipted

__all__ = ["ALLOWED_PATH", "CLAIM_PATH", "RemoteReceipts", "receipt_claims_from_env"]

CLAIM_PATH = "/api/v1/receipts/claim"
"""Where ``hitl serve`` claims an execution with its receipt for another process."""
ALLOWED_PATH = "/api/v1/receipts/allowed"
"""Where ``hitl serve`` issues the receipt of a call that runs without a person, once its own policy agrees."""
_REFUSALS = {
    str(ErrorCode.CLAIM_IN_PROGRESS): ErrorCode.CLAIM_IN_PROGRESS,
    str(ErrorCode.CLAIM_HASH_MISMATCH): ErrorCode.CLAIM_HASH_MISMATCH,
    str(ErrorCode.CLAIM_FENCED): ErrorCode.CLAIM_FENCED,
}
_FINAL = {
    str(ErrorCode.ACTION_REJECTED): ErrorCode.ACTION_REJECTED,
    str(ErrorCode.HANDED_ELSEWHERE): ErrorCode.HANDED_ELSEWHERE,
}
"""hitl serve's refusals of a claim that say the approval does not run here, ever: passed on as they are."""


@dataclass(frozen=True)
class RemoteReceipts:
    """Claims through ``hitl serve`` at ``url`` with the API token ``token`` (a
    :class:`~hitl.engine.receipts.ports.ReceiptClaims`).

    Args:
        url: ``hitl serve``'s base URL (``HITL_API_URL``).
        token: an API token with the ``propose`` scope (``HITL_TOKEN``).
        timeout: seconds to wait for the answer; past it nothing runs (a claim made meanwhile is found by the next
            try, as a claim whose holder stopped is).
    """

    url: str
    token: str
    timeout: float = 10.0
    always: frozenset[str] = frozenset()
    """The tools whose calls get receipts even when they run without a person (``always`` in ``hitl.yaml``)."""

    def sign_here(
        self, approval: Approval, args: Mapping[str, Any], *, key: str, holder: str, index: int | None = None
    ) -> tuple[str, Issued]:
        """Refuse (``receipt_unavailable``): a workflow step's claim is written by its run's own commit, here, and
        only ``hitl serve`` can sign a receipt for it."""
        raise EngineError(
            f"{approval.tool} under approval {approval.id} did not run: a workflow step's receipt is signed where its "
            "run's commit claims it, and only hitl serve holds the key. Let hitl serve resume the run (decide in "
            "Slack, or through the API with HITL_API_URL and HITL_TOKEN)",
            code=ErrorCode.RECEIPT_UNAVAILABLE,
            approval_id=approval.id,
        )

    def covers(self, tool: str) -> bool:
        """Whether calls of ``tool`` that run without a person get a receipt too."""
        return tool in self.always

    async def allowed(self, call: AllowedCall) -> str:
        """The receipt of ``call`` from ``hitl serve``, which checks with its own policy, now, that the call may run
        without a person (the basis it signs is its own finding, not this process's)."""
        body = {
            "tool": call.tool,
            "args": call.args,
            "session": call.session,
            "scope": call.scope,
            "requester": call.requester,
        }
        status, answer = await self._post(ALLOWED_PATH, body, call.tool, None)
        if status == 200 and isinstance(answer, dict) and isinstance(answer.get("receipt"), str):
            return str(answer["receipt"])
        raise self._refused(status, answer, call.tool, None, key=None)

    async def claim(
        self,
        approval: Approval,
        args: Mapping[str, Any],
        *,
        key: str,
        action_hash: str,
        holder: str,
        lease: float,
        retry_failed: bool = False,
    ) -> Receipted:
        """Claim the execution under ``key`` through ``hitl serve`` (see
        :class:`~hitl.engine.receipts.ports.ReceiptClaims`); ``args`` stay here: ``hitl serve`` signs what the
        approval says runs, and refuses when ``action_hash`` is not its hash."""
        body = {
            "key": key,
            "action_hash": action_hash,
            "holder": holder[:200],
            "lease": lease,
            "retry_failed": retry_failed,
        }
        status, answer = await self._post(CLAIM_PATH, body, approval.tool, approval.id)
        if status == 200:
            try:
                claim = Claim.model_validate(answer["claim"])
                # hitl serve hands a claim acquired afresh over as every claim is: the approval is executing.
                handed = claim.acquired and not claim.recovered
                return Receipted(claim, answer.get("receipt"), handed_over=handed)
            except (KeyError, TypeError, ValidationError):
                raise self._unavailable(approval.tool, approval.id, "its answer was not a claim") from None
        raise self._refused(status, answer, approval.tool, approval.id, key=key)

    def _refused(self, status: int, answer: Any, tool: str, approval_id: str | None, *, key: str | None) -> EngineError:
        error = answer.get("error") if isinstance(answer, dict) else None
        code = str(error.get("code", "")) if isinstance(error, dict) else ""
        message = str(error.get("message", "")) if isinstance(error, dict) else ""
        if code in _REFUSALS:
            return ClaimRefused(message, code=_REFUSALS[code], key=key)
        if code == ErrorCode.HALTED:
            return Halted(message, tool=tool)
        if code in _FINAL:
            # hitl serve's own verdict on the approval (withdrawn, or claimed by its run): it will not run, and
            # asking again will not change that, so it is not told as hitl serve being out of reach.
            return EngineError(message, code=_FINAL[code], approval_id=approval_id)
        why = f"it answered {status} {code or 'without a code'}: {message}".strip()
        return self._unavailable(tool, approval_id, why)

    async def _post(self, path: str, body: dict[str, Any], tool: str, approval_id: str | None) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            status, raw = await asyncio.to_thread(_send, request, self.timeout)
            return status, json.loads(raw) if raw else None
        except (OSError, ValueError) as exc:
            raise self._unavailable(tool, approval_id, f"it did not answer ({type(exc).__name__})") from None

    def _unavailable(self, tool: str, approval_id: str | None, why: str) -> EngineError:
        under = f" under approval {approval_id}" if approval_id else ""
        return EngineError(
            f"{tool}{under} did not run: its receipt comes from hitl serve at {self.url}, and {why}; start or reach "
            "hitl serve (HITL_API_URL, HITL_TOKEN), then run it again",
            code=ErrorCode.RECEIPT_UNAVAILABLE,
            approval_id=approval_id,
        )


def _send(request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the operator's URL)
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())


def receipt_claims_from_env(
    environ: Mapping[str, str], *, always: frozenset[str] = frozenset()
) -> RemoteReceipts | None:
    """The :class:`RemoteReceipts` ``HITL_API_URL`` and ``HITL_TOKEN`` describe (``always``: the tools whose calls get
    receipts even when they run without a person); None unless both are set."""
    url, token = environ.get("HITL_API_URL", "").rstrip("/"), environ.get("HITL_TOKEN", "")
    if not url or not token:
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise EngineError(f"HITL_API_URL is hitl serve's URL, e.g. https://hitl.example.com; not {url!r}")
    return RemoteReceipts(url, token, always=always)
