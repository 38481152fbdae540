"""How the API says no: one JSON shape (``{"error": {code, message, retryable, ...}}``) and one status per error
code, so a client branches on the status and the code, and a person reads the message."""

from __future__ import annotations

import math

from aiohttp import web
from pydantic import ValidationError

from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode

from .models import ErrorBody, ErrorDetail, FieldError

__all__ = ["ApiError", "STATUS_OF", "error_response", "from_engine", "from_validation"]

STATUS_OF: dict[str, int] = {
    ErrorCode.INVALID_INPUT: 422,
    ErrorCode.VARIABLES_INVALID: 422,
    ErrorCode.WORKFLOW_INVALID: 422,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.NOT_ELIGIBLE: 403,
    ErrorCode.SELF_APPROVAL: 403,
    ErrorCode.POLICY_DENIED: 403,
    ErrorCode.ALREADY_DECIDED: 409,
    ErrorCode.STALE_VERSION: 409,
    ErrorCode.HASH_MISMATCH: 409,
    ErrorCode.EXPIRED: 409,
    ErrorCode.ILLEGAL_TRANSITION: 409,
    ErrorCode.DUPLICATE_VOTE: 409,
    ErrorCode.NOT_TRUSTABLE: 409,
    ErrorCode.CONFIRMATION_MISMATCH: 422,
    ErrorCode.INVALID_DELEGATE: 422,
    ErrorCode.CLAIM_IN_PROGRESS: 409,
    ErrorCode.CLAIM_HASH_MISMATCH: 409,
    ErrorCode.CLAIM_FENCED: 409,
    ErrorCode.WORKFLOW_CHANGED: 409,
    ErrorCode.EFFECT_IN_DOUBT: 409,
    ErrorCode.ACTION_REJECTED: 409,
    ErrorCode.RECEIPT_SPENT: 409,
    ErrorCode.ID_COLLISION: 409,
    ErrorCode.HANDED_ELSEWHERE: 409,
    ErrorCode.HALTED: 423,
    ErrorCode.APPROVAL_FLOOD: 429,
    ErrorCode.TOO_LATE: 503,
    ErrorCode.RECEIPT_UNAVAILABLE: 503,
    ErrorCode.STORE_ERROR: 503,
    ErrorCode.POLICY_INVALID: 503,
}
"""Every engine error code an API call can meet; anything else is a 409 (the request met a state it cannot
change), never a 500."""


class ApiError(Exception):
    """A refusal the API makes itself (authentication, scope, size, rate, shape)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        fields: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.detail = ErrorDetail(code=code, message=message, retryable=retryable, fields=fields)
        self.headers = headers or {}


def error_response(exc: ApiError) -> web.Response:
    """The HTTP answer of an API error, in the documented error shape."""
    body = ErrorBody(error=exc.detail).model_dump(mode="json", exclude_none=True)
    return web.json_response(body, status=exc.status, headers=exc.headers)


def from_engine(exc: EngineError, current: Approval | None = None) -> ApiError:
    """The API's answer to an engine refusal; on a 409, ``current`` says the version and status to reload."""
    status = STATUS_OF.get(str(exc.code), 409)
    raw = exc.context.get("fields")
    fields = [FieldError(field=str(k), message=str(v)) for k, v in raw.items()] if isinstance(raw, dict) else None
    wait = exc.context.get("retry_after")
    headers = {"Retry-After": str(max(1, math.ceil(float(wait))))} if isinstance(wait, int | float) else None
    err = ApiError(status, str(exc.code), exc.message, retryable=exc.retryable, fields=fields, headers=headers)
    if status == 409 and current is not None:
        err.detail = err.detail.model_copy(update={"version": current.version, "status": str(current.status)})
    return err


def from_validation(exc: ValidationError, *, where: str = "body") -> ApiError:
    """422 naming every field pydantic refused (``body.args``, ``query.limit``...)."""
    fields: list[FieldError] = []
    for e in exc.errors(include_url=False, include_context=False, include_input=False):
        loc = ".".join(str(p) for p in e["loc"])
        fields.append(FieldError(field=f"{where}.{loc}" if loc else where, message=str(e["msg"])))
    listed = "; ".join(f"{f.field}: {f.message}" for f in fields[:5])
    return ApiError(422, str(ErrorCode.INVALID_INPUT), f"the request is invalid: {listed}", fields=fields)
