"""The approval service as the public door hands it out: the engine's, composed with this package's way to reach
``hitl serve`` for receipts. A process that does not hold the signing key (an agent's) claims its approved
executions through ``hitl serve`` (``HITL_API_URL``, ``HITL_TOKEN``) over HTTP, which the engine never does itself.
Given no notifier (an agent's process has no Slack client), what it changes on an approval with a card (a
cancellation, an expiry, a drift check's move, a decision) is queued for ``hitl serve``'s card-update worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from hitl.engine import service
from hitl.engine.policy_engines import OpaClient
from hitl.engine.ports import Clock, Notifier, Store
from hitl.engine.receipts.ports import ReceiptsRemote
from hitl.opa import OpaDataApi
from hitl.receipts.remote import receipt_claims_from_env

__all__ = ["ApprovalService"]


def _queued_cards(store: Store, clock: Clock) -> Notifier:
    """:class:`hitl.bot.outbound.queued_cards.QueuedCards`, as ``hitl`` commands have it: this process holds no Slack
    client, so the card of an approval it changes is drawn by ``hitl serve``. Imported only when a service is built
    (importing ``hitl`` loads no part of the bot)."""
    from hitl.bot.outbound.queued_cards import QueuedCards

    return QueuedCards(store, clock)


class ApprovalService(service.ApprovalService):
    """:class:`hitl.engine.service.ApprovalService`, whose :meth:`from_config` reaches ``hitl serve`` over HTTP
    (:func:`~hitl.receipts.remote.receipt_claims_from_env`) when ``receipts:`` asks for them and this process does
    not sign, asks OPA over HTTP (:class:`~hitl.opa.OpaDataApi`) for ``opa:`` source rules, and given no notifier
    queues its card updates for ``hitl serve`` (:class:`~hitl.bot.outbound.queued_cards.QueuedCards`)."""

    remote_receipts: ClassVar[ReceiptsRemote | None] = receipt_claims_from_env
    opa_client: ClassVar[OpaClient | None] = OpaDataApi
    local_notifier: ClassVar[Callable[[Store, Clock], Notifier] | None] = _queued_cards
