"""The ``receipts:`` section of ``hitl.yaml``: who issues the signed receipts a protected system checks, which key
signs them, how long one is good for, and, per tool, whom it is for and whether the policy's own allowances get
one too. Where the key is read is the composition root's business (only ``hitl serve`` reads it)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hitl.engine.domain.durations import Seconds

__all__ = ["DEFAULT_KEY_ENV", "ReceiptToolSpec", "ReceiptsSpec"]

DEFAULT_KEY_ENV = "HITL_RECEIPT_KEY"
"""The environment variable that holds the signing key's PEM when ``receipts:`` names no key."""


class ReceiptToolSpec(BaseModel):
    """``receipts.tools.<tool>``: whom the tool's receipts are for, and whether every allowed call gets one."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    audience: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\x00-\x20\x7f]+$")
    """The ``aud`` claim: the protected system that accepts this tool's receipts (it checks that it is the one)."""
    always: bool = False
    """Issue a receipt for calls the policy allowed without a person too (``basis: policy``)."""


class ReceiptsSpec(BaseModel):
    """``receipts:`` in ``hitl.yaml`` (absent: no receipts are issued)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    issuer: str = Field(min_length=9, max_length=200)
    """The ``iss`` claim: this deployment's https URL, the one whose ``/.well-known/jwks.json`` has its keys."""
    key_file: str | None = Field(default=None, min_length=1)
    """A PEM file with the Ed25519 private key that signs (``hitl keys new`` writes one)."""
    key_env: str = Field(default=DEFAULT_KEY_ENV, min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable holding the PEM when no ``key_file`` is named."""
    next: str | None = Field(default=None, min_length=1)
    """The PEM file of the key that signs after the next rotation (``hitl keys new`` writes one): published now,
    never used to sign, so verifiers that cache the published keys know it before its first receipt."""
    previous: list[str] = Field(default_factory=list, max_length=8)
    """PEM files of keys that signed before: published during a rotation, never used to sign, so receipts they
    signed still verify until they expire. Their public halves (``hitl keys public``): a private key here is read
    for its public half only, and under ``production: true`` stops any other process that can read it."""
    retired: list[str] = Field(default_factory=list, max_length=64)
    """PEM files of the public halves of keys rotated out of ``previous``: no receipt they signed is in force any
    more, so they are published only at the keys history (``/.well-known/jwks-history.json``), where the evidence
    records they signed still verify. Keep every one: dropping it leaves those records unverifiable."""
    ttl: Seconds = Field(default=300.0, le=86400.0)
    """How long a receipt is good for after it is issued (the ``exp`` claim): 5 minutes unless said."""
    tools: dict[str, ReceiptToolSpec] = Field(default_factory=dict)
    authorization_details: bool = False
    """Also render what was approved and seen as a RAR (RFC 9396) ``authorization_details`` entry of type
    ``urn:hitl:approval``, for relying parties that parse RAR (``view_digests`` is in every receipt anyway)."""

    @field_validator("issuer")
    @classmethod
    def _https(cls, value: str) -> str:
        if not re.match(r"^https://[^\s/?#]+(/[^\s?#]*)?$", value):
            raise ValueError("receipts.issuer is this deployment's https URL, e.g. https://hitl.example.com")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _one_key(self) -> ReceiptsSpec:
        if self.key_file is not None and "key_env" in self.model_fields_set:
            raise ValueError("receipts names its key once: key_file or key_env, not both")
        return self

    def tool(self, name: str) -> ReceiptToolSpec:
        """What ``receipts.tools`` says of ``name`` (the defaults when nothing)."""
        return self.tools.get(name, _PLAIN)


_PLAIN = ReceiptToolSpec()
