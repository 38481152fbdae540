"""Serving the bot: HTTP (aiohttp: /slack/events, /healthz, /metrics) or Socket Mode."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
import aiohttp.http_exceptions
from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

from hitl.bot.app import BotRuntime
from hitl.bot.requests.payloads import MAX_DEPTH, REQUEST, Parsed, PayloadError, parse_request
from hitl.engine.domain.nesting import nesting
from hitl.engine.errors import EngineError

__all__ = [
    "BODY_DEADLINE",
    "MAX_FIELD",
    "MAX_LINE",
    "app_runner",
    "http_app",
    "serve_http",
    "serve_locally",
    "serve_socket",
]

log = logging.getLogger(__name__)


VERIFIER: web.AppKey[SignatureVerifier | None] = web.AppKey("hitl_signature_verifier", SignatureVerifier)
Forged = Callable[[str, str], Awaitable[None]]
"""Told of a request to Slack's URL without a valid signature: the caller's address, what was refused."""
FORGED: web.AppKey[Forged | None] = web.AppKey("hitl_forged_requests")
RUNTIME: web.AppKey[BotRuntime] = web.AppKey("hitl_bot_runtime", BotRuntime)
IN_FLIGHT: web.AppKey[list[int]] = web.AppKey("hitl_in_flight", list)
PARSED: web.RequestKey[Parsed] = web.RequestKey("hitl_parsed", Parsed)
"""Where the middleware leaves a Slack request it verified and parsed, for the handler."""
UNREADABLE = ":warning: This click could not be read, so nothing was recorded. Reload the card and try again."
MAX_IN_FLIGHT = 256
"""Slack requests handled at once by one process; more get 429 with Retry-After (Slack retries), so a flood of slow
or hostile connections cannot starve the event loop or the store."""
REQUEST_TIMEOUT = 10.0
"""Seconds a request may take from its first byte to its answer: a body sent slowly is cut off, not waited for."""
BODY_DEADLINE = 10.0
"""Seconds any request's body may take to arrive, on every route (Slack, the API, health): a half-sent body is
answered 408 and its connection closed at once (no lingering read of the rest)."""
LINGER = 2.0
"""Seconds the server keeps reading (and dropping) the rest of a body it answered without reading, before it closes
the connection: long enough that a client still sending gets its answer instead of a reset, short enough that a
slow one is gone well within 15 s (aiohttp lingers 10 s)."""
MAX_LINE, MAX_FIELD = 32768, 16384
"""aiohttp's limits on a request line and a header, in bytes: room for the API's longest documented query (aiohttp's
default 8 KB is less); anything longer is refused with a 400 before any handler runs."""


class _MalformedHttp(logging.Filter):
    """aiohttp logs a request it cannot parse (not HTTP, a line over the limits) at ERROR with a traceback. It was
    refused with a 400 and changed nothing: one warning line says so, and hostile input cannot fill the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, aiohttp.http_exceptions.HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = "refused a malformed HTTP request (400): %s", (str(exc.message)[:120],)
            record.exc_info = record.exc_text = None
        return True


_QUIET = _MalformedHttp()


async def serve_locally(runner: web.AppRunner, port: int = 0) -> int:
    """Serve a set-up ``runner`` on 127.0.0.1 (the sandbox, tests and benchmarks: never another interface), on
    ``port`` or, by default, one the system picks; returns the port."""
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    server = site._server  # aiohttp gives the bound port only through its server's sockets
    assert server is not None and hasattr(server, "sockets")
    return int(server.sockets[0].getsockname()[1])


def app_runner(app: web.Application, *, shutdown_timeout: float = 1.0, access_log: bool = False) -> web.AppRunner:
    """The runner ``hitl serve`` serves ``app`` with: its HTTP limits, idle keep-alive connections closed after
    15 s (aiohttp keeps them 75 s), and a malformed request logged as one line. The access log (a line per
    request, ~70 µs each) is off unless asked for (``HITL_ACCESS_LOG=1``): Slack's own logs and hitl's audit
    trail already say who clicked what."""
    server_log = logging.getLogger("aiohttp.server")
    if _QUIET not in server_log.filters:
        server_log.addFilter(_QUIET)
    quiet: dict[str, Any] = {} if access_log else {"access_log": None}  # aiohttp skips the logger when None
    return web.AppRunner(
        app,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=15.0,
        lingering_time=LINGER,
        max_line_size=MAX_LINE,
        max_field_size=MAX_FIELD,
        auto_decompress=False,  # compressed bodies are refused (415), never decoded
        **quiet,
    )


@web.middleware
async def _deadline(request: web.Request, handler: Any) -> web.StreamResponse:
    """Before any other check, on every route: a compressed body is refused (415) without being decompressed (the
    server does not decompress: a hostile deflate stream never reaches a decoder), and a body that has not fully
    arrived within :data:`BODY_DEADLINE` seconds fails its read with a 408 and closes its connection."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        refused = web.json_response({"error": "unsupported content encoding: send the body uncompressed"}, status=415)
        refused.force_close()  # no keep-alive; the rest of the body is drained for at most LINGER seconds
        return refused
    if not request.body_exists:
        passed: web.StreamResponse = await handler(request)
        return passed
    timer = asyncio.get_running_loop().call_later(BODY_DEADLINE, _cut_off, request)
    try:
        response: web.StreamResponse = await handler(request)
    except _BodyLate:
        return await _closing(request, 408, f"the body did not arrive within {BODY_DEADLINE:g} s")
    finally:
        timer.cancel()
    return response


class _BodyLate(web.HTTPRequestTimeout):
    """Raised into a handler's pending body read when the body is late (an HTTPException, so every handler's
    error net lets it through to :func:`_deadline`)."""


def _cut_off(request: web.Request) -> None:
    """The body did not arrive in time: its pending read fails (see :func:`_deadline`)."""
    if not request.content.is_eof():
        request.content.set_exception(_BodyLate())


async def _closing(request: web.Request, status: int, message: str) -> web.StreamResponse:
    """Answer ``status`` and close the connection at once, for a client too slow to wait for: whatever else it
    sends is not read (not even for :data:`LINGER` seconds)."""
    response = web.json_response({"error": message}, status=status)
    response.force_close()
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:  # the client hung up as the answer went out: nobody is left to tell, nothing failed
        log.warning(
            "%s %s: the client closed the connection before its %s answer", request.method, request.path, status
        )
    request.protocol.force_close()
    return response


@web.middleware
async def _guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Everything Bolt's adapter should not have to survive, refused before it runs: signature headers that are
    not plain ASCII (400), a body that arrives too slowly (408) or is too large (413), a bad signature (401), and a
    payload that is not exactly one hitl handles (400, one log line). An unexpected error is never a 5xx or a
    traceback."""
    if not request.path.startswith("/slack/"):
        passed: web.StreamResponse = await handler(request)  # not Bolt's: health, metrics, apps mounted beside it
        return passed
    in_flight = request.app[IN_FLIGHT]
    if request.path == "/slack/events" and in_flight[0] >= MAX_IN_FLIGHT:
        return web.json_response({"error": "busy"}, status=429, headers={"Retry-After": "1"})
    in_flight[0] += 1
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT):  # a timer handle, not a task per request as wait_for makes
            response: web.StreamResponse = await _checked(request, handler)
    except web.HTTPException:
        raise
    except TimeoutError:
        log.warning("request to %s took over %.0f s; cut off", request.path, REQUEST_TIMEOUT)
        return await _closing(request, 408, "request timeout")
    except Exception as exc:  # one line, no traceback: hostile input must not fill the log
        log.warning("request to %s failed: %s: %s", request.path, type(exc).__name__, str(exc)[:200])
        return web.json_response({"error": "bad request"}, status=400)
    finally:
        in_flight[0] -= 1
    if response.status >= 500:  # whatever Bolt thought, the request was ours to refuse, not a server fault
        log.warning("request to %s answered %s; reported as 400", request.path, response.status)
        return web.json_response({"error": "bad request"}, status=400)
    return response


async def _checked(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.method == "POST" and request.path == "/slack/events":
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not (stamp.isascii() and signature.isascii()):
            return web.json_response({"error": "malformed signature headers"}, status=400)
        if not (stamp.isdigit() and 0 < len(stamp) <= 12):
            return await _forged(request, "a Slack request with an unreadable timestamp")
        body = await request.read()
        verifier: SignatureVerifier | None = request.app[VERIFIER]
        # Verified here, once (Bolt's own check is off): no signing secret means nothing is accepted.
        if verifier is None or not verifier.is_valid(body=body, timestamp=stamp, signature=signature):
            return await _forged(request, "a Slack request with a bad or stale signature")
        try:
            request[PARSED] = parse_request(body)
        except PayloadError as exc:
            log.warning("refused an unreadable Slack request: %s", exc)
            await _tell_unreadable(request.app[RUNTIME], body)
            return web.json_response({"error": "unreadable payload", "detail": str(exc)}, status=400)
    response: web.StreamResponse = await handler(request)
    return response


async def _forged(request: web.Request, what: str) -> web.Response:
    """401, and the refusal told to the audit (rate-limited per address there): a forged click is an attempt."""
    tell = request.app.get(FORGED)
    if tell is not None:
        try:
            await tell(request.remote or "unknown", what)
        except Exception as exc:  # the answer is 401 either way
            log.warning("could not record a refused Slack request: %s", exc)
    return web.json_response({"error": "invalid request"}, status=401)


def _slack_events(rt: BotRuntime) -> Any:
    """Slack's request URL. The middleware verified and parsed the request; Bolt dispatches the parsed body.

    Bolt takes an already parsed body in the form its Socket Mode adapter hands it (``mode="socket_mode"``), which
    differs from its HTTP form only in skipping Bolt's signature check, done above. So a click's 20 KB body is
    unquoted and parsed once, by C code, instead of twice by urllib and json.
    """

    async def handle(request: web.Request) -> web.Response:
        parsed = request[PARSED]  # a POST here always passed the middleware, which read it
        bolt_request = AsyncBoltRequest(
            body=parsed.body,
            query=request.query_string,
            headers=dict(request.headers),
            context={REQUEST: parsed.request},  # the listeners read the model, not the dict
            mode="socket_mode",
        )
        answer = await rt.app.async_dispatch(bolt_request)
        return web.Response(status=answer.status, body=answer.body, headers=answer.first_headers_without_set_cookie())

    return handle


async def _tell_unreadable(rt: BotRuntime, body: bytes) -> None:
    """Where the request (signed: it came from Slack) names a Slack ``response_url``, tell the clicker privately
    that the click could not be read, so nobody believes it was recorded."""
    try:
        text = dict(parse_qsl(body.decode("utf-8"))).get("payload", "null")
        if nesting(text.encode("utf-8", "surrogatepass")) > MAX_DEPTH:
            return  # measured first: json's parser recurses once per level
        payload = json.loads(text)
    except ValueError:
        return
    url = payload.get("response_url") if isinstance(payload, dict) else None
    if not rt.response_urls.allowed(url):
        return
    message = {"response_type": "ephemeral", "replace_original": False, "text": UNREADABLE}
    try:
        async with rt.side.http.post(str(url), json=message, timeout=aiohttp.ClientTimeout(total=3)) as resp:
            await resp.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.warning("could not tell the clicker their click was unreadable: %s", type(exc).__name__)


def http_app(rt: BotRuntime, *, forged: Forged | None = None) -> web.Application:
    """Bolt's aiohttp application plus the health and metrics endpoints. ``forged``: told of each request without a
    valid signature (the composition root audits them)."""
    app = web.Application()
    app.router.add_post("/slack/events", _slack_events(rt))
    app[VERIFIER] = SignatureVerifier(rt.signing_secret) if rt.signing_secret else None
    app[FORGED] = forged
    app[RUNTIME] = rt
    app[IN_FLIGHT] = [0]
    app.middlewares.append(_deadline)
    app.middlewares.append(_guard)

    async def healthz(_: web.Request) -> web.Response:
        try:
            await rt.store.ping()
        except EngineError as exc:  # the store is down: say so, and let the orchestrator act
            return web.json_response({"ok": False, "error": str(exc)[:200]}, status=503)
        return web.json_response({"ok": True, "replica": rt.ctx.replica})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", make_aiohttp_handler(rt.ctx.metrics.registry))  # prometheus_client's own
    return app


async def serve_http(
    rt: BotRuntime,
    *,
    host: str,
    port: int,
    ready: asyncio.Event | None = None,
    app: web.Application | None = None,
    reuse_port: bool = False,
    access_log: bool = False,
) -> None:
    """Serve ``app`` (default: :func:`http_app`) until cancelled. ``reuse_port``: bind with ``SO_REUSEPORT``, so
    several processes serve one port and the kernel spreads connections among them (``hitl serve --workers``)."""
    runner = app_runner(app or http_app(rt), access_log=access_log)
    await runner.setup()
    # Slack retries what is not acknowledged within 3 s: a long graceful drain on shutdown helps nobody.
    site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
    await site.start()
    log.info("hitl serving Slack requests on http://%s:%s/slack/events", host, port)
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


async def serve_socket(rt: BotRuntime, app_token: str) -> None:
    """Serve Slack over Socket Mode (no public URL) until cancelled."""
    handler = AsyncSocketModeHandler(rt.app, app_token, web_client=rt.client)
    try:
        await handler.start_async()  # type: ignore[no-untyped-call]
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
