"""The ``/api/v1`` application: authentication, limits and error shape around every route.

Order of refusals, none of which changes anything: 413 (body over ``api.max_body``; 411 without a length), 401
(no or unknown bearer token: audited, see :mod:`.unauthenticated`), 429 (the token's rate), then the route's own
4xx. An error inside a route is
answered in the documented error shape; a bug is a logged 500 with no detail (the fuzz test keeps there being
none).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web

from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.runtime.lifecycle import RunLifecycle
from hitl.receipts.keys import Keys

from . import (
    approvals,
    authzen,
    delegations,
    evidence,
    executions,
    grants,
    group_decisions,
    identity,
    oversight,
    receipts,
    runs,
    withdrawals,
)
from .context import CALLER, CONTEXT, ApiContext, LiveConfig
from .limits import RateLimiter
from .openapi import document
from .problems import ApiError, error_response, from_engine
from .routes import Endpoint
from .unauthenticated import Unauthenticated

if TYPE_CHECKING:  # what signs imports joserfc: only a deployment with receipts loads it (hitl.receipts.publishing)
    from hitl.receipts.signing import SigningKeys

__all__ = ["PREFIX", "api_app", "authzen_app", "endpoints", "openapi_document"]

PREFIX = "/api/v1"
log = logging.getLogger(__name__)


_AUDITED_BY_THE_ENGINE = frozenset(str(c) for c in ErrorCode)
"""A refusal with one of these codes was audited where it was made (a decision's atomic step, the service)."""


@web.middleware
async def _guard(request: web.Request, handler: Any) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    try:
        config, tokens = ctx.config.current()
        limit = config.api.max_body
        if request.content_length is not None and request.content_length > limit:
            raise ApiError(413, "body_too_large", f"the body is over {limit} bytes (api.max_body)")
        caller = tokens.bearer(request.headers.get("Authorization", ""))
        if caller is None:
            await ctx.unauthenticated.refused(
                surface="api", address=request.remote or "unknown", what=f"{request.method} {request.path}"
            )
            raise ApiError(
                401,
                "unauthorized",
                "send a valid API token as 'Authorization: Bearer <token>' (hitl token new makes one)",
                headers={"WWW-Authenticate": 'Bearer realm="hitl"'},
            )
        wait = ctx.limiter.take(caller.token, rate=config.api.rate, burst=config.api.burst)
        if wait > 0:
            raise ApiError(
                429,
                "rate_limited",
                f"token {caller.token} is over its rate ({config.api.rate:g}/s); retry after the Retry-After seconds",
                retryable=True,
                headers={"Retry-After": RateLimiter.retry_after(wait)},
            )
        request[CALLER] = caller
        if request.body_exists and request.content_length is None:
            # Chunked bodies are refused rather than read to find out how big they are.
            raise ApiError(411, "length_required", "send the body with a Content-Length header")
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as exc:
        if exc.status == 403 and exc.detail.code not in _AUDITED_BY_THE_ENGINE:
            await ctx.refused(request, exc)
        return error_response(exc)
    except web.HTTPException as exc:
        if isinstance(exc, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(exc.allowed_methods))
            what = f"{request.method} is not allowed here (allowed: {allowed})"
            return error_response(ApiError(405, "method_not_allowed", what, headers={"Allow": allowed}))
        if exc.status == 404:
            return error_response(ApiError(404, "not_found", "no such endpoint; see /api/v1/openapi.json"))
        raise
    except EngineError as exc:
        return error_response(from_engine(exc))
    except Exception:
        log.exception("API %s %s failed", request.method, request.path)
        return error_response(ApiError(500, "internal", "hitl failed to answer; this is a bug, please report it"))


def endpoints() -> list[Endpoint]:
    """Every route of the API, with its contract."""
    return [
        *approvals.routes(),
        *group_decisions.routes(),
        *executions.routes(),
        *runs.routes(),
        *oversight.routes(),
        *grants.routes(),
        *delegations.routes(),
        *receipts.routes(),
        *withdrawals.routes(),
        *evidence.routes(),
        *identity.routes(),
    ]


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, generated from :func:`endpoints` (served at ``/api/v1/openapi.json``)."""
    return document(endpoints(), prefix=PREFIX)


async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def api_app(
    lifecycle: RunLifecycle,
    config_path: str | None,
    *,
    limiter: RateLimiter | None = None,
    receipt_keys: Keys | None = None,
    signing: SigningKeys | None = None,
) -> web.Application:
    """The API as an aiohttp sub-application, to mount at :data:`PREFIX` (``hitl serve`` does); ``receipt_keys``:
    the public keys a receipt is checked with before it is spent."""
    app = web.Application(middlewares=[_guard], client_max_size=4 * 1024 * 1024 + 1)
    limiter = limiter or RateLimiter()
    unauthenticated = Unauthenticated(lifecycle.store, lifecycle.contexts.clock, limiter=limiter)
    app[CONTEXT] = ApiContext(lifecycle, LiveConfig(config_path), limiter, unauthenticated, receipt_keys, signing)
    app.router.add_get("/openapi.json", _openapi)
    app.add_routes([e.route() for e in endpoints()])
    return app


_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate", "X-Request-ID")
"""The headers of an error an AuthZEN caller keeps when its body becomes a message string."""


@web.middleware
async def _message_strings(request: web.Request, handler: Any) -> web.StreamResponse:
    """AuthZEN's error shape: an error's body is "an error message string" (Authorization API 1.0, "Error
    Responses"), not hitl's JSON error object. The string leads with hitl's code (``invalid_input: ...``), which the
    ``X-Hitl-Error`` header carries alone for a program to read; the status and the kept headers are unchanged."""
    response: web.StreamResponse = await handler(request)
    if response.status < 400 or not isinstance(response, web.Response) or response.content_type != "application/json":
        return response
    try:
        error = json.loads(response.body if isinstance(response.body, bytes) else b"")["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        return response
    headers = {name: response.headers[name] for name in _KEPT_HEADERS if name in response.headers}
    headers["X-Hitl-Error"] = code
    return web.Response(status=response.status, text=f"{code}: {message}", headers=headers, content_type="text/plain")


def authzen_app(api: web.Application) -> web.Application:
    """The AuthZEN evaluation endpoints as a sub-application to mount at :data:`~.authzen.ACCESS_PREFIX`: the same
    tokens, limits and refusals as ``api`` (and its context: one rate per token across both)."""
    app = web.Application(middlewares=[_message_strings, _guard], client_max_size=4 * 1024 * 1024 + 1)
    app[CONTEXT] = api[CONTEXT]
    app.add_routes([e.route() for e in authzen.routes()])
    return app


def authzen_metadata_handler(api: web.Application) -> Any:
    """``GET /.well-known/authzen-configuration``: where this decision point answers, from ``web.public_url`` when
    the deployment has one (else the address it was asked at). Public, as discovery documents are: it says nothing
    but the endpoints' addresses."""
    ctx = api[CONTEXT]

    async def handler(request: web.Request) -> web.Response:
        try:
            web_spec = ctx.config.current()[0].web
        except ApiError as exc:
            return error_response(exc)
        base = web_spec.public_url if web_spec is not None else f"{request.scheme}://{request.host}"
        return web.json_response(authzen.metadata(base).model_dump(mode="json"))

    return handler
