"""What every API handler shares: the run lifecycle, the live ``hitl.yaml`` (re-read when the file changes, so a
removed token is refused on the next request), and the request helpers (caller, typed body, typed query)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from hitl.engine.config.api import Scope
from hitl.engine.config.hitl_yaml import HitlConfig, load_config
from hitl.engine.domain.decide import eligible
from hitl.engine.domain.hashing import exact_int
from hitl.engine.domain.models import Approval, Reviewer, Status
from hitl.engine.domain.nesting import MAX_NESTING, nesting
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput
from hitl.engine.ports import ReviewerDirectory
from hitl.engine.receipts.withdrawing import within_roles
from hitl.engine.runtime.lifecycle import RunLifecycle, run_of
from hitl.receipts.keys import Keys

from .limits import RateLimiter
from .problems import ApiError, from_validation
from .tokens import Caller, TokenBook
from .unauthenticated import Unauthenticated

if TYPE_CHECKING:  # what signs imports joserfc: only a deployment with receipts loads it (hitl.receipts.publishing)
    from hitl.receipts.signing import SigningKeys

__all__ = [
    "CALLER",
    "CONTEXT",
    "ApiContext",
    "LiveConfig",
    "TokenReviewers",
    "may_act_on",
    "may_see",
    "within_token_roles",
]

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)


class LiveConfig:
    """``hitl.yaml`` as it is now: stat on every read, parsed again only when the file changed."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._stamp: tuple[int, int, int] | None = None
        self._config = HitlConfig()
        self._tokens = TokenBook([])
        self._error: str | None = None

    def current(self) -> tuple[HitlConfig, TokenBook]:
        if self.path is None:
            return self._config, self._tokens
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise self._refuse(f"{self.path} cannot be read ({exc.strerror})") from None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            try:
                config = load_config(self.path)
            except EngineError as exc:
                # Fail closed: a config that no longer parses is not an excuse to keep honouring old tokens.
                self._stamp, self._error = stamp, exc.message
                log.error("hitl.yaml no longer loads; the API refuses every request until it does: %s", exc.message)
            else:
                self._stamp, self._error = stamp, None
                self._config, self._tokens = config, TokenBook(config.api.tokens)
        if self._error is not None:
            raise self._refuse(self._error)
        return self._config, self._tokens

    @staticmethod
    def _refuse(why: str) -> ApiError:
        return ApiError(
            503, str(ErrorCode.POLICY_INVALID), f"hitl.yaml is not usable: {why}; fix it and retry", retryable=True
        )


@dataclass
class ApiContext:
    """The API's view of the process: decisions and runs through the lifecycle, the live config, the limiter."""

    lifecycle: RunLifecycle
    config: LiveConfig
    limiter: RateLimiter
    unauthenticated: Unauthenticated
    """Requests without a valid token: audited up to a rate per address."""
    receipt_keys: Keys | None = None
    """The public keys receipts are checked with before one is spent (None: this deployment issues none)."""
    signing: SigningKeys | None = None
    """``hitl serve``'s signing keys, which sign evidence records (None: this deployment signs none)."""

    async def reviewer(
        self, caller: Caller, approval: Approval, memo: dict[str | None, Reviewer] | None = None
    ) -> Reviewer:
        """The token's reviewer with the roles the approval's context gives that id, narrowed to the token's roles.
        ``memo`` keeps the answer per run within one request (a page of approvals reads each run's context once)."""
        run = run_of(approval)
        if memo is not None and run in memo:
            return memo[run]
        context = await self.lifecycle.context_of(approval)
        who = await TokenReviewers(caller, context.service.reviewers).reviewer(caller.reviewer)
        if memo is not None:
            memo[run] = who
        return who

    def present(self, a: Approval) -> Presentation:
        """``a``'s one view, with the served hitl.yaml's summary sentences and declared schemas."""
        return self.config.current()[0].present(a)

    async def visible(self, caller: Caller, approval_id: str, *, own: bool = False, acting: bool = False) -> Approval:
        """The approval, or 404 when it does not exist or the token may not see it (the same answer, so a token
        learns nothing of approvals that are not its business). ``own``: only the identity that asked may have it
        (an execution's claim and outcome). ``acting``: for a decision or a withdrawal, checked by
        :func:`may_act_on`, since their own step refuses one outside the token's roles (403 ``not_eligible``,
        audited)."""
        approval = await self.lifecycle.store.approvals.get(approval_id)
        if acting:
            seen = may_act_on(caller, approval)
        else:
            seen = may_see(caller, approval, now=self.lifecycle.contexts.clock.now())
        if not seen or (own and approval.requester != caller.reviewer):
            raise ApiError(404, str(ErrorCode.NOT_FOUND), f"no approval {approval_id!r}")
        return approval

    async def refused(self, request: web.Request, exc: ApiError) -> None:
        """Audit a refusal an authenticated caller met here (a scope it lacks, a tool it may not touch): a failure to
        write the line does not change the answer."""
        caller = request.get(CALLER)
        who = caller.reviewer if caller is not None else "unknown"
        via = caller.via if caller is not None else "api"
        entry = AuditEntry(
            at=self.lifecycle.contexts.clock.now(),
            actor=who[:200],
            event="refused",
            outcome=exc.detail.code,
            detail=f"{request.method} {request.path} via {via}: {exc.detail.message}"[:500],
        )
        try:
            await self.lifecycle.store.audit.append(entry)
        except EngineError:
            log.warning("could not audit the API refusal of %s (%s)", who, exc.detail.code)

    async def waiting_on(self, caller: Caller) -> int | None:
        """How many pending approvals the token's reviewer may decide (their roles as the served configuration gives
        them, narrowed to the token's; not their own requests), up to 1,000; None for a token that may not decide."""
        if not caller.may(Scope.DECIDE):
            return None
        reviewers = TokenReviewers(caller, self.lifecycle.contexts.default.service.reviewers)
        who = await reviewers.reviewer(caller.reviewer)
        if not who.roles:  # no role decides nothing, not even an approval that names none (see eligible)
            return 0
        return await self.lifecycle.store.approvals.count_pending(
            roles=sorted(who.roles), exclude_requester=who.id, now=self.lifecycle.contexts.clock.now()
        )

    async def can_decide(
        self, caller: Caller, approval: Approval, memo: dict[str | None, Reviewer] | None = None
    ) -> bool:
        if not caller.may(Scope.DECIDE) or approval.status is not Status.PENDING:
            return False
        who = await self.reviewer(caller, approval, memo)
        return eligible(approval, who, self.lifecycle.contexts.clock.now()) and who.id not in approval.approvers


def may_see(caller: Caller, approval: Approval, *, now: float) -> bool:
    """Whether ``caller`` may read (or wait on) ``approval`` at ``now``: one it may act on (:func:`may_act_on`),
    within the token's ``roles`` when it names some (:func:`within_token_roles`)."""
    return may_act_on(caller, approval) and within_token_roles(caller, approval, now)


def may_act_on(caller: Caller, approval: Approval) -> bool:
    """Whether ``caller`` may decide or withdraw ``approval``, before that step's own checks (its eligibility, the
    token's ``roles``, which it refuses with 403 ``not_eligible``): a tool its token sees, and then
    - an agent's token (one that may propose) sees only what its own identity asked, never a practice approval;
    - a reviewer's token (one that may decide) sees what waits on reviewers, practice approvals among them, each
      looking like any other;
    - any other token (read only) sees the approvals of its tools, but no practice approval;
    - an admin's token sees everything.
    """
    if not caller.sees(approval.tool):
        return False
    if Scope.ADMIN in caller.scopes or Scope.DECIDE in caller.scopes:
        return True
    if is_practice(approval):
        return False
    return Scope.PROPOSE not in caller.scopes or approval.requester == caller.reviewer


def within_token_roles(caller: Caller, approval: Approval, now: float) -> bool:
    """Whether a token narrowed by ``roles:`` reaches ``approval`` for reading: by :func:`within_roles`, the rule by
    which it decides or withdraws one (a narrowed admin token reads no further than it acts), or as the approval's
    requester (its own identity asked it, so reading it tells the token nothing it does not know)."""
    return approval.requester == caller.reviewer or within_roles(approval, caller.reviewer, caller.roles, now)


@dataclass(frozen=True)
class TokenReviewers:
    """The reviewer directory of an API token (a :class:`~hitl.engine.ports.ReviewerDirectory`): the roles the
    configuration's directory gives an id, narrowed to the token's own ``roles`` when it names some."""

    caller: Caller
    configured: ReviewerDirectory

    async def reviewer(self, reviewer_id: str) -> Reviewer:
        """``reviewer_id`` as the configuration knows them, holding only the roles the token allows."""
        who = await self.configured.reviewer(reviewer_id)
        if self.caller.roles is not None:
            who = who.model_copy(update={"roles": who.roles & self.caller.roles})
        return who


CONTEXT: web.AppKey[ApiContext] = web.AppKey("hitl_api_context", ApiContext)
CALLER: web.RequestKey[Caller] = web.RequestKey("hitl_api_caller", Caller)


def caller_of(request: web.Request, scope: Scope) -> Caller:
    """The authenticated caller (the middleware put it there), refused with 403 without ``scope``."""
    caller = request[CALLER]
    if not caller.may(scope):
        raise ApiError(
            403,
            "missing_scope",
            f"this token lacks the {scope!s} scope; ask an admin for a token with it",
        )
    return caller


async def body_of(request: web.Request, model: type[M]) -> M:
    """The JSON body as ``model`` (422 with every bad field; 415 when it is not JSON; 400 when it is not JSON or
    nests deeper than :data:`MAX_NESTING` levels, measured before anything parses it)."""
    if request.content_type != "application/json":
        raise ApiError(415, "unsupported_media_type", "send the body as JSON (Content-Type: application/json)")
    try:
        raw = await request.read()
    except ConnectionResetError:
        # The client hung up before its body arrived: nobody waits for the answer, and nothing went wrong here.
        log.warning("%s %s: the client closed the connection before its body arrived", request.method, request.path)
        raise ApiError(400, "incomplete_body", "the connection closed before the body arrived; send it again") from None
    if nesting(raw) > MAX_NESTING:
        raise ApiError(
            400,
            "malformed_json",
            f"the body nests objects and arrays deeper than {MAX_NESTING} levels; send it flatter",
        )
    try:
        # Parsed once, in JSON mode: strict types as JSON has them (no "1" for 1), enums from their string values.
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors(include_url=False)):
            raise _unreadable(raw) from None
        raise from_validation(exc) from None


def _unreadable(raw: bytes) -> ApiError:
    """Why a body the parser refused is refused: a number beyond what JSON carries exactly (422, the same limit as
    everywhere), else not JSON at all (400)."""
    try:
        json.loads(raw, parse_int=exact_int)
    except InvalidInput as exc:
        return ApiError(422, str(ErrorCode.INVALID_INPUT), exc.message)
    except ValueError:
        pass
    return ApiError(400, "malformed_json", "the body is not valid JSON")


def query_of(request: web.Request, model: type[M]) -> M:
    """The query string as ``model`` (422 naming every bad parameter). A repeated parameter is refused."""
    query: dict[str, str] = {}
    for key in request.query:
        values = request.query.getall(key)
        if len(values) > 1:
            raise ApiError(422, str(ErrorCode.INVALID_INPUT), f"query parameter {key!r} is given more than once")
        query[key] = values[0]
    try:
        return model.model_validate(query)
    except ValidationError as exc:
        raise from_validation(exc, where="query") from None
