"""The web inbox's routes on ``hitl serve``: sign-in (``/auth/login``, ``/auth/callback``, ``/auth/logout``), the
signed-in reviewer's pending list (``/inbox``) and the decision page (``/inbox/approvals/{id}`` and its
``/decisions``).

Every answer carries the headers of a bank's page (:data:`HEADERS`); every POST carries the session's CSRF token and,
when the browser says where it comes from, our own origin. A signed-in reviewer is an API caller with ``read`` and
``decide`` for their id: the same visibility (404 for what they may not see, as for what does not exist), the same
decision call, recorded ``via web``.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from aiohttp import web
from multidict import MultiDictProxy

from hitl.api.context import ApiContext, LiveConfig
from hitl.api.limits import RateLimiter
from hitl.api.problems import ApiError
from hitl.api.tokens import Caller
from hitl.api.unauthenticated import Unauthenticated
from hitl.engine.config.api import Scope
from hitl.engine.config.web import WebSpec
from hitl.engine.domain.decide import eligible
from hitl.engine.domain.halts import acted_on, covering, halt_message
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.practice import is_practice, practice_note
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, ErrorCode, NotFound
from hitl.engine.runtime.lifecycle import RunLifecycle
from hitl.mail.states import DELIVERY_EVENTS, delivery_line

from . import pages
from .deciding import decide_from_form
from .full_value import full_value_page
from .identity import reviewer_of, still_maps
from .inbox import inbox_query, inbox_view
from .inbox_page import inbox_page
from .oidc import OidcClient, SignInError, random_token
from .oversight import oversight, oversight_page
from .proxies import client_address, networks
from .sessions import Session, SessionBook

__all__ = ["HEADERS", "WebInbox", "safe_return_path"]

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
"""On every answer of the web inbox: no script at all, nothing from elsewhere, never framed, never cached, no
address leaked to another site."""
SIGN_IN_RATE = 0.5
SIGN_IN_BURST = 10
"""Sign-in attempts per client address: a burst of 10, then one every 2 s."""
_OPENED_KEPT = 100_000
"""Openings remembered (so not audited again); past this many the memory starts over."""
MAX_FORM = 64 * 1024
"""Bytes a decision's form may hold."""
_RETURN = re.compile(r"/(inbox)(/oversight|/approvals/[A-Za-z0-9_\-]{1,64}(/values/[0-9]{1,4})?)?")
_NUMBER = re.compile(r"[0-9]{1,4}")


def safe_return_path(candidate: str | None) -> str:
    """Where to go after sign-in: one of the web inbox's own pages, else the inbox (never another site)."""
    # fullmatch: match's "$" also matches before a final line break, which would reach the Location header.
    return candidate if candidate is not None and _RETURN.fullmatch(candidate) else "/inbox"


class WebInbox:
    """The web inbox of one ``hitl serve`` (``web:`` in hitl.yaml)."""

    def __init__(self, spec: WebSpec, lifecycle: RunLifecycle, config_path: str | None, *, secret: str) -> None:
        self.spec = spec
        clock = lifecycle.contexts.clock
        self.now = clock.now
        limiter = RateLimiter()
        self.ctx = ApiContext(
            lifecycle, LiveConfig(config_path), limiter, Unauthenticated(lifecycle.store, clock, limiter=limiter)
        )
        self.oidc = OidcClient(spec, secret, now=clock.now)
        self.sessions = SessionBook(clock.now, idle=spec.idle_minutes * 60.0, absolute=spec.absolute_hours * 3600.0)
        self.limiter = limiter
        prefix = "__Host-" if spec.secure else ""  # __Host- needs Secure, which plain HTTP on 127.0.0.1 cannot set
        self.session_cookie = f"{prefix}hitl_session"
        self.browser_cookie = f"{prefix}hitl_signin"
        self.origin = "{0.scheme}://{0.netloc}".format(urlsplit(spec.public_url))
        self.proxies = networks(spec.trusted_proxies)
        self._opened: set[tuple[str, str]] = set()
        """(reviewer, approval id) whose pending page this process served and audited as ``opened``."""

    def remap(self, spec: WebSpec) -> int:
        """Map sign-ins by a reloaded hitl.yaml's ``web.subjects`` and ``web.emails`` (the rest of ``web:`` needs a
        restart): the next sign-in maps by them, and a session whose subject no longer maps to its reviewer ends
        now. How many sessions ended."""
        self.spec = self.spec.model_copy(update={"subjects": dict(spec.subjects), "emails": dict(spec.emails)})
        if self.spec.oidc.slack_team_id is not None:  # Slack's sign-in maps by the token's own claims
            return 0
        return self.sessions.end_where(lambda s: not still_maps(spec, s.subject, s.reviewer))

    def add_to(self, app: web.Application) -> None:
        """Add the routes to ``hitl serve``'s application."""
        app.router.add_get("/auth/login", self._page(self.login))
        app.router.add_get("/auth/callback", self._page(self.callback))
        app.router.add_post("/auth/logout", self._page(self.logout))
        app.router.add_get("/inbox", self._page(self.inbox))
        app.router.add_get("/inbox/oversight", self._page(self.oversight))
        app.router.add_get("/inbox/static/inbox.css", self._page(self.stylesheet))
        app.router.add_get("/inbox/approvals/{id}", self._page(self.approval))
        app.router.add_post("/inbox/approvals/{id}/decisions", self._page(self.decide))
        app.router.add_get("/inbox/approvals/{id}/values/{index}", self._page(self.full_value))
        app.on_response_prepare.append(_bank_headers)

    async def close(self) -> None:
        """Close the connections to the provider."""
        await self.oidc.close()

    def _page(self, handler: Handler) -> Handler:
        async def page(request: web.Request) -> web.StreamResponse:
            try:
                response = await handler(request)
            except web.HTTPException as exc:  # aiohttp's own refusals (405, 413...): raised on, with the headers
                exc.headers.update(HEADERS)
                raise
            except EngineError as exc:
                log.warning("web inbox %s %s: %s", request.method, request.path, exc.message)
                response = _html(pages.message_page("Not available", "hitl cannot answer now; try again"), 503)
            except ApiError as exc:  # mostly hitl.yaml no longer loading (the live config fails closed): a 503
                log.warning("web inbox %s %s: %s", request.method, request.path, exc.detail.message)
                text = exc.detail.message if exc.status < 500 else "hitl cannot answer now; try again"
                response = _html(pages.message_page("Not available", text), exc.status)
            except Exception:
                log.exception("web inbox %s %s failed", request.method, request.path)
                response = _html(pages.message_page("Something went wrong", "hitl failed to answer; try again"), 500)
            response.headers.update(HEADERS)
            return response

        return page

    def _cookie(self, response: web.StreamResponse, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name, value, max_age=max_age, path="/", secure=self.spec.secure, httponly=True, samesite="Lax"
        )

    def _clear(self, response: web.StreamResponse, name: str) -> None:
        # With the attributes it was set with: a browser ignores a __Host- Set-Cookie that lacks Secure, and the
        # cookie would outlive its clearing.
        response.del_cookie(name, path="/", secure=self.spec.secure, httponly=True, samesite="Lax")

    async def _audit(self, request: web.Request, who: str, outcome: str, detail: str) -> None:
        entry = AuditEntry(
            at=self.now(),
            actor=who[:200],
            event="sign_in",
            outcome=outcome,
            detail=f"web sign-in from {self._from(request)}: {detail}"[:500],
        )
        try:
            await self.ctx.lifecycle.store.audit.append(entry)
        except EngineError:
            log.warning("could not audit a web sign-in (%s)", outcome)

    async def _opened_by(self, reviewer: str, approval: Approval) -> None:
        """Audit, once per reviewer and approval in this process, that the decision page reached them (a delivery
        state: ``opened``, whichever channel brought them)."""
        if (reviewer, approval.id) in self._opened:
            return
        if len(self._opened) >= _OPENED_KEPT:
            self._opened.clear()  # at worst a page opened again is audited again
        self._opened.add((reviewer, approval.id))
        entry = AuditEntry(
            at=self.now(), actor=reviewer[:200], event="opened", approval_id=approval.id, version=approval.version
        )
        try:
            await self.ctx.lifecycle.store.audit.append(entry)
        except EngineError:
            log.warning("could not audit the opening of %s's page", approval.id)

    def _from(self, request: web.Request) -> str:
        """Where a sign-in comes from, as the audit says it: the client, and the proxy it came through."""
        client, peer = client_address(request, self.proxies), request.remote or "unknown"
        return client if client == peer else f"{client} (through {peer})"

    async def _limited(self, request: web.Request) -> bool:
        """Whether this client is over its sign-in rate (audited, itself at most once a minute per client: a
        flood must not fill the trail). The client is the peer, or behind a trusted proxy the address it forwards
        (:func:`~hitl.web.proxies.client_address`): keyed on the proxy, one client would lock everyone out."""
        address = client_address(request, self.proxies)
        if self.limiter.take(f"web-sign-in:{address}", rate=SIGN_IN_RATE, burst=SIGN_IN_BURST) == 0:
            return False
        if self.limiter.take(f"web-sign-in-audit:{address}", rate=1 / 60, burst=1) == 0:
            await self._audit(request, "unknown", "rate_limited", "too many sign-in attempts")
        return True

    def session(self, request: web.Request) -> Session | None:
        """The request's live session, or None."""
        return self.sessions.get(request.cookies.get(self.session_cookie))

    def _to_sign_in(self, request: web.Request) -> web.Response:
        return _redirect(f"/auth/login?next={quote(request.path, safe='/')}")

    async def login(self, request: web.Request) -> web.StreamResponse:
        """Start a sign-in: remember (here, with its state) where to return, then go to the provider."""
        if await self._limited(request):
            return _html(pages.message_page("Too many sign-ins", "Wait a minute, then sign in again"), 429)
        browser = random_token()
        state, pending = self.sessions.begin(browser=browser, return_to=safe_return_path(request.query.get("next")))
        try:
            target = await self.oidc.authorize_url(state=state, nonce=pending.nonce, verifier=pending.verifier)
        except SignInError as exc:
            return _html(pages.message_page("Sign-in unavailable", exc.message), 502)
        response = _redirect(target)
        self._cookie(response, self.browser_cookie, browser, 600)
        return response

    async def _refuse(self, request: web.Request, exc: SignInError, status: int = 400) -> web.StreamResponse:
        await self._audit(request, "unknown", exc.code, exc.message)
        page = pages.message_page("Sign-in failed", exc.message, link=("/auth/login", "Sign in again"))
        return _html(page, status)

    async def callback(self, request: web.Request) -> web.StreamResponse:
        """The provider's answer: the code is checked against this browser's sign-in, exchanged and verified."""
        if await self._limited(request):
            return _html(pages.message_page("Too many sign-ins", "Wait a minute, then sign in again"), 429)
        q = request.query
        pending = self.sessions.finish(q.get("state", ""), browser=request.cookies.get(self.browser_cookie, ""))
        if pending is None:
            why = "this sign-in was not started in this browser, took too long, or was used already; sign in again"
            return await self._refuse(request, SignInError("state_mismatch", why))
        if "error" in q or "code" not in q:
            return await self._refuse(request, SignInError("provider_refused", "the provider did not sign you in"))
        try:
            await self.oidc.check_iss(q.get("iss"))
            token = await self.oidc.exchange(q["code"], pending.verifier)
            claims = await self.oidc.verify(token, nonce=pending.nonce)
        except SignInError as exc:
            return await self._refuse(request, exc)
        reviewer = reviewer_of(self.spec, claims)
        subject = f"{claims['iss']} {claims['sub']}"
        if reviewer is None:
            await self._audit(request, subject, "not_a_reviewer", "signed in, but maps to no reviewer id")
            text = "You signed in, but hitl knows no reviewer by that account; ask an admin to map it (web.subjects)"
            return _html(pages.message_page("Not a reviewer here", text), 403)
        # The session this browser held (if any) ends: its id, overwritten here, must not live on in a copy.
        self.sessions.revoke(request.cookies.get(self.session_cookie))
        sid, _ = self.sessions.open(reviewer=reviewer, issuer=str(claims["iss"]), subject=str(claims["sub"]))
        await self._audit(request, reviewer, "ok", f"signed in as {subject}"[:300])
        response = _redirect(pending.return_to)
        self._cookie(response, self.session_cookie, sid, self.spec.absolute_hours * 3600)
        self._clear(response, self.browser_cookie)
        return response

    def _check_post(self, request: web.Request, session: Session, form_csrf: str) -> None:
        # A browser says where a POST comes from: Sec-Fetch-Site, and Origin ("null" under no-referrer).
        origin = request.headers.get("Origin")
        site = request.headers.get("Sec-Fetch-Site")
        if (origin is not None and origin not in (self.origin, "null")) or site not in (None, "same-origin"):
            raise web.HTTPForbidden(text="cross-site request refused", content_type="text/plain")
        if not hmac.compare_digest(form_csrf.encode(), session.csrf.encode()):
            raise web.HTTPForbidden(text="the form is stale or forged: reload the page", content_type="text/plain")

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """Sign out (a POST with the CSRF token): the session is revoked here, not only forgotten by the browser."""
        session = self.session(request)
        form = await _form(request)
        if session is not None:
            self._check_post(request, session, str(form.get("csrf", "")))
            self.sessions.revoke(request.cookies.get(self.session_cookie))
        response = _html(pages.message_page("Signed out", "You are signed out.", link=("/auth/login", "Sign in")))
        self._clear(response, self.session_cookie)
        return response

    def caller(self, session: Session) -> Caller:
        """The signed-in reviewer as an API caller: what a reviewer's read-and-decide token of that id may do."""
        return Caller(session.reviewer, "web", frozenset({Scope.READ, Scope.DECIDE}), None, None)

    async def inbox(self, request: web.Request) -> web.StreamResponse:
        """The signed-in reviewer's inbox: what waits on them, most important first, and the decided history,
        filtered and searched by the query (a 400 that names the field for a query that does not read)."""
        session = self.session(request)
        if session is None:
            return self._to_sign_in(request)
        q = inbox_query(dict(request.query))
        view = await inbox_view(self.ctx, self.caller(session), q, now=self.now())
        return _html(inbox_page(view, q, reviewer=session.reviewer, csrf=session.csrf))

    async def oversight(self, request: web.Request) -> web.StreamResponse:
        """The admin role's oversight page: figures per reviewer, the practice catch rate, who approved what."""
        session = self.session(request)
        if session is None:
            return self._to_sign_in(request)
        since = request.query.get("since", "7d")
        found = await oversight(self.ctx, session.reviewer, since, now=self.now())
        return _html(oversight_page(found, since, reviewer=session.reviewer, csrf=session.csrf))

    async def stylesheet(self, request: web.Request) -> web.StreamResponse:
        """The pages' stylesheet (served here: nothing comes from a third party)."""
        return web.Response(text=pages.STYLES, content_type="text/css")

    async def approval(
        self,
        request: web.Request,
        *,
        error: str | None = None,
        status: int = 200,
        fields: dict[str, str] | None = None,
    ) -> web.Response:
        """The decision page: 404 alike for an approval that does not exist and one this reviewer may not see."""
        session = self.session(request)
        if session is None:
            return self._to_sign_in(request)
        caller = self.caller(session)
        approval_id = request.match_info["id"]
        approval = await self._visible(caller, approval_id)
        if approval is None:
            return _html(pages.message_page("Not found", f"No approval {approval_id}."), 404)
        can = await self.ctx.can_decide(caller, approval)
        if approval.status is Status.PENDING:
            await self._opened_by(session.reviewer, approval)
        halt = None
        if approval.status is Status.PENDING:  # the stop switch: the page says so, and offers Reject alone
            halt = covering(await self.ctx.lifecycle.store.halts.active(), acted_on(approval))
        trail = await self.ctx.lifecycle.store.audit.entries(approval_id=approval.id)
        body = pages.decision_page(
            approval,
            self.ctx.present(approval),
            reviewer=session.reviewer,
            csrf=session.csrf,
            can_decide=can,
            error=error,
            halted=halt_message(halt, acted_on(approval)) if halt is not None else None,
            notice=session.told.pop(approval.id, None) if error is None else None,
            field_errors=fields or {},
            delivery=self._delivery(trail),
            withdrawn=next((e for e in trail if e.event == "withdrawn"), None),  # the first withdrawal stands
        )
        return _html(body, status)

    @staticmethod
    def _delivery(trail: list[AuditEntry]) -> list[str]:
        """How an approval reached people beyond its card: its e-mail queued, sent or refused (from its audit)."""
        return [
            delivery_line(e.event, actor=e.actor, detail=e.detail, outcome=e.outcome)
            for e in trail
            if e.event in DELIVERY_EVENTS and e.event != "opened"  # the reader is the one opening it
        ]

    async def full_value(self, request: web.Request) -> web.StreamResponse:
        """One argument in full, as Slack's "Show in full": for the people who decide it (and its requester) only,
        a refusal audited as Slack's is; 404 alike for what does not exist and what this reviewer may not see."""
        session = self.session(request)
        if session is None:
            return self._to_sign_in(request)
        caller = self.caller(session)
        approval_id, index, page = request.match_info["id"], request.match_info["index"], request.query.get("page")
        approval = await self._visible(caller, approval_id) if _NUMBER.fullmatch(index) else None
        if approval is None or (page is not None and not _NUMBER.fullmatch(page)):
            return _html(pages.message_page("Not found", f"No such value of approval {approval_id}."), 404)
        reviewer = await self.ctx.reviewer(caller, approval)
        if session.reviewer != approval.requester and not eligible(approval, reviewer, self.now()):
            await self.ctx.lifecycle.refused(
                approval.id, session.reviewer, ErrorCode.NOT_ELIGIBLE, "showing a value in full"
            )
            text = "A value in full is for the people who decide this approval (and its requester); you are not one."
            return _html(pages.message_page("Not yours to read", text), 403)
        shown = full_value_page(approval, int(index), int(page or 0))
        if shown is None:
            return _html(pages.message_page("Not found", f"No such value of approval {approval_id}."), 404)
        return _html(pages.layout(shown[0], shown[1], reviewer=session.reviewer, csrf=session.csrf))

    async def _visible(self, caller: Caller, approval_id: str) -> Approval | None:
        """The approval if this reviewer may see it, else None (not found and not theirs look the same)."""
        try:
            return await self.ctx.visible(caller, approval_id)
        except (ApiError, NotFound):
            return None

    async def decide(self, request: web.Request) -> web.StreamResponse:
        """A decision from the page's form, through the same call as a click; then back to the page (303)."""
        session = self.session(request)
        if session is None:
            raise web.HTTPForbidden(text="sign in first: /auth/login", content_type="text/plain")
        if request.content_length is None:  # a chunked body is refused rather than read to learn its size
            raise web.HTTPLengthRequired(text="send the form with a Content-Length header", content_type="text/plain")
        if request.content_length > MAX_FORM:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_FORM, actual_size=request.content_length)
        form = {k: str(v) for k, v in (await _form(request)).items() if isinstance(v, str)}
        self._check_post(request, session, form.get("csrf", ""))
        caller = self.caller(session)
        approval = await self._visible(caller, request.match_info["id"])
        if approval is None:
            return _html(pages.message_page("Not found", "No such approval."), 404)
        refused = await decide_from_form(self.ctx, caller, approval, form)
        if refused is not None:
            return await self.approval(request, error=refused[1], status=refused[0], fields=refused[2])
        if is_practice(approval):  # as in Slack, the decider alone learns it was practice (on their next view)
            note = practice_note(await self.ctx.lifecycle.store.approvals.get(approval.id))
            if note is not None:
                session.told[approval.id] = note
        return _redirect(f"/inbox/approvals/{approval.id}")


async def _bank_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The headers on every answer under the web inbox's paths, the router's own 404 and 405 included."""
    if request.path == "/inbox" or request.path.startswith(("/inbox/", "/auth/")):
        response.headers.update(HEADERS)


async def _form(request: web.Request) -> MultiDictProxy[str | bytes | bytearray | web.FileField]:
    """The request's form, or 400 when its body is not one (bytes not in its charset, an unknown charset, a
    multipart body without its boundary): a client's mistake, not hitl's failure."""
    try:
        return await request.post()
    except (ValueError, LookupError):  # UnicodeDecodeError is a ValueError; the body is not echoed back
        why = "the form cannot be read: send it as application/x-www-form-urlencoded in UTF-8"
        raise web.HTTPBadRequest(text=why, content_type="text/plain") from None


def _redirect(location: str) -> web.Response:
    """303 See Other to ``location`` (a path of ours, or the provider's sign-in address)."""
    return web.Response(status=303, headers={"Location": location})


def _html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")
