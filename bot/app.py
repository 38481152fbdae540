"""build_bot(settings) -> BotRuntime: the Bolt app wired to the engine. No globals, no I/O at import."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler, AsyncServerErrorRetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

from bot.context import BotContext
from bot.listeners import register
from bot.metrics import Metrics
from bot.notifier import SlackNotifier
from bot.reviewers import ReviewerDirectory
from bot.settings import BotSettings
from bot.signing import Signer
from bot.worker import Worker
from engine.clock import SystemClock
from engine.config import load_config
from engine.domain.ids import short_id
from engine.domain.models import Approval
from engine.ports import Clock, Store
from engine.service import ApprovalService
from engine.storage import open_store

__all__ = ["BotRuntime", "build_bot"]

log = logging.getLogger("hitl.bot")


@dataclass
class BotRuntime:
    """The running pieces; ``close()`` releases them."""

    app: AsyncApp
    ctx: BotContext
    client: AsyncWebClient
    worker: Worker
    http: aiohttp.ClientSession
    store: Store

    async def close(self) -> None:
        await self.worker.stop()
        await self.ctx.drain()
        await self.ctx.notifier.close()
        await self.http.close()
        await self.store.close()


async def build_bot(
    settings: BotSettings,
    *,
    store: Store | None = None,
    clock: Clock | None = None,
    replica: str | None = None,
    socket_mode: bool = False,
    retry_interval: float | None = None,
) -> BotRuntime:
    """Wire settings -> store, config, Slack client, service, listeners, notifier, worker."""
    if socket_mode:
        settings.require_socket()
    else:
        settings.require_http()
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else ""
    config = load_config(settings.hitl_config)
    clock = clock or SystemClock()
    replica = replica or f"bot:{socket.gethostname()}:{short_id('r')}"
    store = store or open_store(settings.hitl_store)
    http = aiohttp.ClientSession()
    server_errors = (
        AsyncServerErrorRetryHandler(max_retry_count=3)
        if retry_interval is None
        else AsyncServerErrorRetryHandler(
            max_retry_count=3,
            interval_calculator=FixedValueRetryIntervalCalculator(fixed_internal=retry_interval),
        )
    )
    handlers = [AsyncRateLimitErrorRetryHandler(max_retry_count=3), server_errors]
    client = AsyncWebClient(token=token, base_url=settings.api_base, session=http, retry_handlers=handlers)
    metrics = Metrics()
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
    )
    service = ApprovalService.from_config(config, store=store, clock=clock, notifier=notifier)
    ctx = BotContext(
        service=service,
        config=config,
        directory=ReviewerDirectory(config.build_roles(), client, clock),
        notifier=notifier,
        metrics=metrics,
        signer=Signer(secret or token),
        replica=replica,
    )
    app = AsyncApp(
        client=client,
        signing_secret=secret or None,
        process_before_response=False,
        raise_error_for_unhandled_request=False,
    )
    register(app, ctx)
    worker = Worker(ctx, interval=settings.sweep_interval)

    async def on_decided(a: Approval) -> None:
        await worker.approval_decided(a)

    service.on_decided.append(on_decided)
    return BotRuntime(app=app, ctx=ctx, client=client, worker=worker, http=http, store=store)
