"""The approval service as the public door hands it out: the engine's, composed with this package's way to reach
``hitl serve`` for receipts. A process that does not hold the signing key (an agent's) claims its approved
executions through ``hitl serve`` (``HITL_API_URL``, ``HITL_TOKEN``) over HTTP, which the engine never does itself."""

from __future__ import annotations

from typing import ClassVar

from hitl.engine import service
from hitl.engine.policy_engines import OpaClient
from hitl.engine.receipts.ports import ReceiptsRemote
from hitl.opa import OpaDataApi
from hitl.receipts.remote import receipt_claims_from_env

__all__ = ["ApprovalService"]


class ApprovalService(service.ApprovalService):
    """:class:`hitl.engine.service.ApprovalService`, whose :meth:`from_config` reaches ``hitl serve`` over HTTP
    (:func:`~hitl.receipts.remote.receipt_claims_from_env`) when ``receipts:`` asks for them and this process does
    not sign, and asks OPA over HTTP (:class:`~hitl.opa.OpaDataApi`) for ``opa:`` source rules."""

    remote_receipts: ClassVar[ReceiptsRemote | None] = receipt_claims_from_env
    opa_client: ClassVar[OpaClient | None] = OpaDataApi
