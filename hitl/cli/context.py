"""What a ``hitl`` command runs with: the runtime settings (store, config, clock) and who is deciding."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hitl.engine.errors import ErrorCode, InvalidInput
from hitl.engine.runtime.settings import RuntimeSettings

if TYPE_CHECKING:
    from hitl.engine.domain.policy_source import OpaSource
    from hitl.engine.policy_engines.ports import PolicyEngine
    from hitl.engine.ports import Clock, Notifier, Store
    from hitl.engine.receipts.ports import ReceiptClaims

__all__ = ["CliSettings"]


@dataclass(frozen=True)
class CliSettings:
    """Flags win over environment variables (``HITL_STORE``, ``HITL_CONFIG``, ``HITL_REVIEWER``, ``HITL_NOW``)."""

    runtime: RuntimeSettings
    reviewer: str | None

    @classmethod
    def resolve(cls, *, store: str | None, config: str | None, reviewer: str | None) -> CliSettings:
        return cls(
            runtime=RuntimeSettings.from_env(
                store=store, config=config, remote=_receipt_claims_from_env, opa=_opa_client, notifier=_queued_cards
            ),
            reviewer=reviewer or os.environ.get("HITL_REVIEWER") or None,
        )

    def require_reviewer(self) -> str:
        if not self.reviewer:
            raise InvalidInput(
                "say who is deciding: pass --as REVIEWER or set HITL_REVIEWER", code=ErrorCode.INVALID_INPUT
            )
        return self.reviewer


def _queued_cards(store: Store, clock: Clock) -> Notifier:
    """:class:`hitl.bot.outbound.queued_cards.QueuedCards`: a command holds no Slack client, so what it changes on an
    approval with a card (a decision, an expiry, a withdrawal) is queued for ``hitl serve``'s card worker to draw,
    every local command alike. Imported only when a command opens the store."""
    from hitl.bot.outbound.queued_cards import QueuedCards

    return QueuedCards(store, clock)


def _opa_client(source: OpaSource) -> PolicyEngine:
    """:class:`hitl.opa.OpaDataApi`, imported only when a rule asks OPA."""
    from hitl.opa import OpaDataApi

    return OpaDataApi(source)


def _receipt_claims_from_env(environ: Mapping[str, str], *, always: frozenset[str]) -> ReceiptClaims | None:
    """:func:`hitl.receipts.remote.receipt_claims_from_env`, imported only when a ``receipts:`` section asks for it:
    its package loads the JOSE library (~75 ms of CPU a command), which most commands never use."""
    from hitl.receipts.remote import receipt_claims_from_env

    return receipt_claims_from_env(environ, always=always)
