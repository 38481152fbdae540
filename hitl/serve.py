"""``hitl serve`` wiring: the engine's runtime with the Slack notifier and reporter, the Bolt app deciding
through the run lifecycle, and the background loop (resume jobs, recovery, expiry, card sweeps)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from hitl.api.app import PREFIX, api_app, authzen_app, authzen_metadata_handler
from hitl.api.authzen import ACCESS_PREFIX, WELL_KNOWN
from hitl.api.unauthenticated import Unauthenticated
from hitl.api.webhooks import WebhookDelivery
from hitl.bot.app import BotRuntime, build_app, slack_side
from hitl.bot.context import BotContext
from hitl.bot.outbound.notifier import SlackNotifier
from hitl.bot.outbound.workspace import SlackWorkspace
from hitl.bot.server import http_app
from hitl.bot.settings import BotSettings
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import HitlConfig, load_config
from hitl.engine.config.web import WebSpec
from hitl.engine.consequences.workers import WorkerConsequences
from hitl.engine.domain.alerts import cards_undelivered
from hitl.engine.domain.retention import Retention
from hitl.engine.errors import PolicyError
from hitl.engine.ports import Clock, Store
from hitl.engine.process.workers import worker_name
from hitl.engine.receipts.issuing import ReceiptSweep
from hitl.engine.receipts.unavailable import UnusableKey
from hitl.engine.runtime.alerts import AlertWatch
from hitl.engine.runtime.background import Background
from hitl.engine.runtime.compose import config_path_for
from hitl.engine.runtime.lifecycle import RunLifecycle
from hitl.engine.runtime.practice import TwinPlanting
from hitl.engine.runtime.process import Runtime
from hitl.engine.runtime.retention import RetentionSweep
from hitl.engine.storage import open_store
from hitl.engine.subscribers.events import EventSink, Outbox
from hitl.mail.delivery import MailDelivery, mail_delivery, or_by_mail
from hitl.opa import OpaDataApi
from hitl.receipts import KeySet
from hitl.receipts.publishing import JWKS_PATH, KEYS_HISTORY_PATH, jwks_handler, receipt_keys
from hitl.reload import ConfigReload
from hitl.web.app import WebInbox

if TYPE_CHECKING:  # what signs imports joserfc: loaded only when hitl.yaml asks for receipts (receipt_keys)
    from hitl.receipts.signing import SigningKeys

__all__ = ["Server", "build_server", "new_replica_id"]

log = logging.getLogger(__name__)


def _warn_plain_http(api_base: str) -> None:
    """The bot token travels with every Web API call: say so loudly if it would cross a network unencrypted."""
    url = urlsplit(api_base)
    local = url.hostname in ("127.0.0.1", "localhost", "::1")
    if url.scheme != "https" and not local:
        log.warning(
            "SLACK_API_URL %s is plain HTTP to a non-local host: the bot token would travel unencrypted. "
            "Use https:// (Slack's default) unless this is a test stand-in on your own machine",
            api_base,
        )


@dataclass
class Server:
    """Everything ``hitl serve`` runs; ``close()`` stops and releases it all."""

    runtime: Runtime
    bot: BotRuntime
    background: Background
    webhooks: WebhookDelivery
    twins: TwinPlanting
    """Plants each practice twin when its moment has come (one of the background loop's sweepers)."""
    config_path: str | None = None
    """The hitl.yaml the API re-reads (tokens, webhooks, workflows)."""
    receipt_keys: SigningKeys | None = None
    """The keys receipts are signed with (``receipts:`` in hitl.yaml); None when none are issued."""
    inbox: WebInbox | None = None
    """The web inbox (``web:`` in hitl.yaml); None without one."""
    reload: ConfigReload | None = None
    """Reads hitl.yaml again (on SIGHUP): its roles and web sign-in mappings apply to the next decision."""

    @property
    def app(self) -> AsyncApp:
        return self.bot.app

    @property
    def ctx(self) -> BotContext:
        return self.bot.ctx

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def lifecycle(self) -> RunLifecycle:
        return self.runtime.lifecycle

    def web_app(self) -> web.Application:
        """What ``hitl serve`` answers over HTTP: Slack's endpoints, health and metrics, and the API at /api/v1."""
        refusals = Unauthenticated(self.store, self.lifecycle.contexts.clock)

        async def forged(address: str, what: str) -> None:
            await refusals.refused(surface="slack", address=address, what=what, reason="no valid Slack signature")

        app = http_app(self.bot, forged=forged)
        keys = KeySet(self.receipt_keys.jwks()) if self.receipt_keys is not None else None
        api = api_app(self.lifecycle, self.config_path, receipt_keys=keys, signing=self.receipt_keys)
        app.add_subapp(PREFIX, api)
        app.add_subapp(ACCESS_PREFIX, authzen_app(api))
        app.router.add_get(WELL_KNOWN, authzen_metadata_handler(api))
        app.router.add_get(JWKS_PATH, jwks_handler(self.receipt_keys))
        app.router.add_get(KEYS_HISTORY_PATH, jwks_handler(self.receipt_keys, history=True))
        if self.inbox is not None:
            self.inbox.add_to(app)
        return app

    async def close(self) -> None:
        await self.background.stop()
        if self.inbox is not None:
            await self.inbox.close()
        await self.webhooks.close()
        await self.bot.close()
        await self.runtime.close()


def new_replica_id() -> str:
    """This process's name among the replicas (job consumer, run owner, and ``replica`` in its log lines)."""
    return worker_name("bot")


async def build_server(
    settings: BotSettings,
    *,
    store: Store | None = None,
    clock: Clock | None = None,
    replica: str | None = None,
    socket_mode: bool = False,
    retry_interval: float | None = None,
    pace_clock: Clock | None = None,
    one_of_workers: bool = False,
) -> Server:
    """Wire settings -> store, config, Slack side, runtime (contexts + lifecycle), Bolt app, background loop.
    ``pace_clock``: the clock Slack calls are paced on (default ``clock``); ``one_of_workers``: this process shares
    its port with others of ``hitl serve --workers N``."""
    config = _served_config(settings, socket_mode=socket_mode, one_of_workers=one_of_workers)
    keys = receipt_keys(config, config_path_for(settings.hitl_config))
    retention = Retention.parse(settings.hitl_retention, settings.hitl_audit_retention)
    clock = clock or SystemClock()
    replica = replica or new_replica_id()
    purger = f"retention:{replica}"
    store = store or open_store(settings.hitl_store)
    side = slack_side(
        settings,
        store=store,
        clock=clock,
        config=config,
        replica=replica,
        retry_interval=retry_interval,
        pace_clock=pace_clock,
    )
    runtime = Runtime.build(
        store=store,
        clock=clock,
        config_path=settings.hitl_config,
        notifier=side.notifier,
        reporter=side.reporter,
        worker_id=replica,
        signer=keys if keys is not None or config.receipts is None else UnusableKey(),
        workspace=SlackWorkspace(side.client),
        consequences=WorkerConsequences(),  # where the API and Slack propose: never in this process, which holds keys
        opa=OpaDataApi,
    )
    bot = build_app(settings, side=side, lifecycle=runtime.lifecycle, config=config, replica=replica)
    outbox = runtime.contexts.default.service.events
    webhooks = WebhookDelivery(store, clock, consumer=replica, outbox=outbox if isinstance(outbox, Outbox) else None)
    notifier = side.notifier
    twins = TwinPlanting(runtime.contexts.default.service, consumer=replica)

    mail = mail_delivery(
        config, store, clock, consumer=replica, live=lambda: reload.config, registry=side.metrics.registry
    )
    notifier.posts.states.audited = mail is not None  # the card's delivery audited beside the e-mail's
    alerts = _alert_watch(config, store, clock, replica, outbox, notifier, mail)
    background = Background(
        runtime.lifecycle,
        interval=min(2.0, settings.sweep_interval),
        sweepers=[
            twins,  # first: a twin planted now is carded and its events delivered this same round
            side.notifier,
            webhooks,
            side.metrics,
            RetentionSweep(store, clock, retention, actor=purger),
            alerts,
            runtime.contexts.default.service.delegations,  # each delegation that ran out, audited once
            ReceiptSweep(store, clock),
        ],
        sweep_interval=settings.sweep_interval,
        watchers=[side.notifier.watch_created],
    )
    side.metrics.watch(background.outages)
    path = config_path_for(settings.hitl_config)
    inbox = _web_inbox(config.web, runtime.lifecycle, path)
    reload = ConfigReload(path, config, runtime.contexts, store, bot.ctx.reviewers, inbox, actor=f"reload:{replica}")
    if mail is not None:
        background.sweepers.append(mail)
    return Server(
        runtime=runtime,
        bot=bot,
        background=background,
        webhooks=webhooks,
        twins=twins,
        config_path=path,
        receipt_keys=keys,
        inbox=inbox,
        reload=reload,
    )


def _served_config(settings: BotSettings, *, socket_mode: bool, one_of_workers: bool) -> HitlConfig:
    """The served ``hitl.yaml``, once the settings the transport needs are there; refused under ``--workers`` when it
    serves the web inbox."""
    if socket_mode:
        settings.require_socket()
    else:
        settings.require_http()
    _warn_plain_http(settings.api_base)
    config = load_config(config_path_for(settings.hitl_config))
    if one_of_workers and config.web is not None:
        # The kernel spreads connections over the workers, and each keeps its sign-in sessions in its own memory:
        # a reviewer signed in by one would be sent to sign in again by the next, at random.
        raise PolicyError(
            "the web inbox (web: in hitl.yaml) keeps sign-in sessions in one process: serve it without --workers "
            "(run more replicas behind a proxy with sticky sessions instead)"
        )
    return config


def _alert_watch(
    config: HitlConfig,
    store: Store,
    clock: Clock,
    replica: str,
    outbox: EventSink | None,
    notifier: SlackNotifier,
    mail: MailDelivery | None,
) -> AlertWatch:
    """The alert rules' watch: posted to Slack, by e-mail where Slack cannot take them; with ``email:``, the
    built-in alert on cards that could not be delivered too."""

    async def post_alert(text: str) -> None:
        await notifier.post_alert(text, channel=config.alerts.channel)

    builtin = [cards_undelivered(config.email.undelivered_after)] if config.email is not None else []
    return AlertWatch(
        store, clock, config.alerts, holder=replica, events=outbox, post=or_by_mail(post_alert, mail), builtin=builtin
    )


def _web_inbox(spec: WebSpec | None, lifecycle: RunLifecycle, config_path: str | None) -> WebInbox | None:
    """The web inbox ``web:`` configures, refusing to start without its client secret (fail closed)."""
    if spec is None:
        return None
    secret = os.environ.get(spec.oidc.client_secret_env, "")
    if not secret:
        raise PolicyError(
            f"web.oidc.client_secret_env names {spec.oidc.client_secret_env}, which is not set: export the client "
            "secret of the app registered at your OpenID Connect provider, or remove web: from hitl.yaml"
        )
    return WebInbox(spec, lifecycle, config_path, secret=secret)
