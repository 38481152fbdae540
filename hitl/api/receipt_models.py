"""The bodies and answers of a withdrawal, of a receipt's introspection and of an evidence record (``hitl.api.models``
holds the rest)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.receipts.claims import ReceiptStatus
from hitl.engine.receipts.withdrawing import REASON_MAX

__all__ = ["EvidenceView", "IntrospectRequest", "Introspection", "Withdrawn", "WithdrawalRequest"]


class WithdrawalRequest(BaseModel):
    """Withdraw an approval whose receipts are unspent."""

    model_config = ConfigDict(extra="forbid", strict=True)
    reason: str = Field(min_length=1, max_length=REASON_MAX, pattern=r"^[^\x00-\x08\x0b-\x1f\x7f]+$")
    """Why it must not be acted on (kept in its audit trail)."""


class Withdrawn(BaseModel):
    """An approval withdrawn: every receipt of it now fails redeem (409 ``withdrawn``)."""

    model_config = ConfigDict(extra="forbid")
    approval_id: str
    withdrawn: Literal[True] = True


class IntrospectRequest(BaseModel):
    """Ask what a receipt is now."""

    model_config = ConfigDict(extra="forbid", strict=True)
    receipt: str = Field(min_length=20, max_length=5_000, pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
    """The compact JWS, as for a redeem."""


class Introspection(BaseModel):
    """What a receipt is now: ``active`` (a redeem would spend it), ``consumed``, ``withdrawn`` or ``expired``."""

    model_config = ConfigDict(extra="forbid")
    status: ReceiptStatus


class EvidenceView(BaseModel):
    """An executed approval's evidence record, and where the keys that verify it stay published."""

    model_config = ConfigDict(extra="forbid")
    approval_id: str
    evidence: str
    """A compact JWS (``typ: hitl-evidence+jwt``, no ``exp``): ``iss``, ``sub`` (the approval), ``jti``, ``iat``,
    ``tool``, ``args_sha256`` (of what ran), ``requester``, ``deciders`` (each ``id``, ``decision``, ``at`` and
    ``view_digest``), ``decided_at``, ``executed_at`` and ``receipts`` (the ``jti`` of each receipt issued for it)."""
    keys_history: str
    """The keys history URL (every key this deployment lists, retired ones too): verify with it, and keep a copy."""
