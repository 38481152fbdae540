"""The Slack side of ``hitl serve``: the Web API client, the notifier and reporter (engine ports), and the Bolt
app with its listeners. No globals, no I/O at import; the composition root (``hitl.serve``) wires it to the
engine's runtime."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.http_retry.builtin_async_handlers import AsyncServerErrorRetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.context import BotContext
from hitl.bot.listeners import register
from hitl.bot.metrics import Metrics
from hitl.bot.outbound.home_tabs import HomeTabs
from hitl.bot.outbound.notifier import SlackNotifier
from hitl.bot.outbound.pacer import PacedClient, Pacer
from hitl.bot.outbound.reporter import SlackReporter
from hitl.bot.outbound.reviewers import SlackReviewers
from hitl.bot.requests.payloads import parsed_once
from hitl.bot.requests.response_urls import ResponseUrls, response_url_guard
from hitl.bot.requests.signing import Signer
from hitl.bot.settings import BotSettings
from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.delegation.delegations import DelegatedReviewers
from hitl.engine.ports import Clock, Store
from hitl.engine.runtime.lifecycle import RunLifecycle

__all__ = ["DRAIN", "BotRuntime", "SlackSide", "build_app", "slack_side"]

log = logging.getLogger(__name__)

DRAIN = 10.0
"""Seconds a stopping replica waits for the follow-ups of the requests it acknowledged (well inside the 30 s an
orchestrator usually allows between SIGTERM and SIGKILL, so the store is still closed cleanly)."""


class _TokenSkipped(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


_TOKEN_SKIPPED = _TokenSkipped()


@dataclass
class SlackSide:
    """What talks to Slack: built before the engine's runtime, which takes the notifier and reporter."""

    client: AsyncWebClient
    http: aiohttp.ClientSession
    notifier: SlackNotifier
    reporter: SlackReporter
    metrics: Metrics
    pacer: Pacer

    async def close(self) -> None:
        await self.notifier.close()
        await self.http.close()


def slack_side(
    settings: BotSettings,
    *,
    store: Store,
    clock: Clock,
    config: HitlConfig,
    replica: str,
    retry_interval: float | None = None,
    pace_clock: Clock | None = None,
) -> SlackSide:
    """The Web API client (paced within Slack's limits, a 429 held for every replica, 5xx retried), the notifier
    that posts and updates cards, the reporter. ``pace_clock``: the clock the pacing runs on (default ``clock``)."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    http = aiohttp.ClientSession()
    server_errors = (
        AsyncServerErrorRetryHandler(max_retry_count=3)
        if retry_interval is None
        else AsyncServerErrorRetryHandler(
            max_retry_count=3,
            interval_calculator=FixedValueRetryIntervalCalculator(fixed_internal=retry_interval),
        )
    )
    # No 429 handler of slack_sdk's: it sleeps for one call while the others go on calling (the pacer holds all).
    pacer = Pacer(pace_clock or clock, store.holds)
    client = PacedClient(
        pacer=pacer, token=token, base_url=settings.api_base, session=http, retry_handlers=[server_errors]
    )
    metrics = Metrics(store, clock)
    backoff = (lambda n: retry_interval) if retry_interval is not None else (lambda n: min(30.0, 0.5 * 2**n))
    notifier = SlackNotifier(
        client,
        store,
        clock,
        config.slack,
        default_channel=settings.hitl_approval_channel,
        replica=replica,
        metrics=metrics,
        backoff=backoff,
        declared=config.declared_schema,
        view_of=config.present,
        members_of=lambda role: config.roles.get(role, []),
        page_of=config.web.approval_url if config.web is not None else None,
        withdrawable=config.receipts is not None,
    )
    return SlackSide(
        client=client, http=http, notifier=notifier, reporter=SlackReporter(notifier), metrics=metrics, pacer=pacer
    )


@dataclass
class BotRuntime:
    """The Bolt app and what its listeners share; ``close()`` releases the Slack side."""

    app: AsyncApp
    ctx: BotContext
    side: SlackSide
    signing_secret: str | None = None
    """Verified by the HTTP server before a payload is parsed (None in Socket Mode)."""
    response_urls: ResponseUrls = field(default_factory=ResponseUrls)
    """Where replies may go (the server tells the clicker when a click could not be read)."""

    @property
    def client(self) -> AsyncWebClient:
        return self.side.client

    @property
    def store(self) -> Store:
        return self.ctx.store

    async def close(self, *, drain: float = DRAIN) -> None:
        """Let the work that follows each ack finish, for at most ``drain`` seconds, then close the Slack side.
        What is cut off then is a follow-up message (the decisions themselves are recorded before any ack), so a
        Slack that stopped answering does not hold a stopping replica past its orchestrator's grace period."""
        try:
            await self.ctx.wait_idle(timeout=drain)
        except TimeoutError:
            log.warning("stopping with %d Slack follow-up(s) unfinished after %g s", self.ctx.inflight, drain)
        await self.ctx.home.close()
        await self.side.close()


def build_app(
    settings: BotSettings, *, side: SlackSide, lifecycle: RunLifecycle, config: HitlConfig, replica: str
) -> BotRuntime:
    """The Bolt ``AsyncApp`` with hitl's listeners, deciding through ``lifecycle``."""
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else ""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    clock = lifecycle.contexts.clock
    delegations = lifecycle.contexts.default.service.delegations
    reviewers = DelegatedReviewers(SlackReviewers(config.build_roles(), side.client, clock), delegations)
    home = HomeTabs(
        side.client,
        lifecycle.store,
        clock,
        reviewers,
        side.metrics,
        may_see_trust=config.may_decide_tool,
        view_of=config.present,
        pace=side.pacer.clock,
        delegations=delegations,
    )
    delegations.on_change.append(home.delegation_changed)
    side.notifier.on_card.append(home.changed)
    side.notifier.on_halts.append(home.changed)
    ctx = BotContext(
        lifecycle=lifecycle,
        config=config,
        reviewers=reviewers,
        notifier=side.notifier,
        metrics=side.metrics,
        signer=Signer(secret or token),
        replica=replica,
        home=home,
    )
    # Bolt reads SLACK_BOT_TOKEN from the environment even when it is given a client, then warns on every start
    # that the token goes unused: the client carries it, so the warning says nothing to an operator.
    logging.getLogger("slack_bolt.AsyncApp").addFilter(_TOKEN_SKIPPED)
    app = AsyncApp(
        # Named, as Bolt would name it (the file that builds it): unnamed, Bolt calls inspect.stack(), which reads
        # the source of every frame above it (about 0.1 s of CPU a start, more under a deep caller such as a test).
        name="app.py",
        client=side.client,
        # The HTTP server verifies every request's signature before Bolt sees it (bot/server.py); Socket Mode
        # needs none. Checking twice cost a second HMAC per click.
        request_verification_enabled=False,
        # Bolt answers Slack when the listener returns, not by polling for ack() every 10 ms (which made an
        # unloaded click's ack ~12 ms). Listeners that answer at once and keep working do the rest in a task of
        # their own (BotContext.acked); the form listeners answer after their decision, with its errors.
        process_before_response=True,
        raise_error_for_unhandled_request=False,
    )
    # A local stand-in for Slack (SLACK_API_URL off slack.com) serves its own response URLs: trust that one too.
    api = urlsplit(settings.api_base)
    urls = ResponseUrls([api.netloc] if api.hostname not in ("slack.com", "www.slack.com") else [])
    app.use(parsed_once)
    app.use(response_url_guard(urls))
    register(app, ctx)
    return BotRuntime(app=app, ctx=ctx, side=side, signing_secret=secret or None, response_urls=urls)
