"""The keys ``hitl serve`` signs receipts with: the one that signs now, the one that signs after the next rotation
(published first, so verifiers know it before its first receipt), and the ones that signed before, published so what
they signed still verifies until it expires. Only ``hitl serve`` loads them."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwa import EdDSAAlgorithm
from joserfc.jwk import OKPKey

from hitl.engine.receipts.evidence import EVIDENCE_TYPE
from hitl.engine.receipts.spec import ReceiptsSpec
from hitl.receipts.verify import RECEIPT_TYPE

__all__ = ["KeyProblem", "SigningKeys", "load_signing_keys", "new_key_pem", "public_kid", "public_pem"]

log = logging.getLogger(__name__)
_ALG = "EdDSA"  # what every JOSE library knows; verifiers accept Ed25519 (RFC 9864) too


class _EdDSASigning(EdDSAAlgorithm):
    """joserfc's EdDSA, without the warning it raises at each use because RFC 9864 deprecates the name: hitl signs
    with the name every verifier knows on purpose (and accepts ``Ed25519`` too), so the warning would say nothing
    new, millions of times. Silencing it here, not with a filter around each signature, leaves the process's
    warning filters alone (a ``-W error`` run stays as strict) and costs nothing per signature."""

    security_warning = ""  # joserfc warns only when it is set


class _SigningRegistry(jws.JWSRegistry):
    """joserfc's registry with :class:`_EdDSASigning` under ``EdDSA`` (for signing only; verification is
    :mod:`hitl.receipts.verify`'s, with joserfc's own)."""

    algorithms = {**jws.JWSRegistry.algorithms, _ALG: _EdDSASigning()}


class KeyProblem(ValueError):
    """A signing key that cannot be used: missing, unreadable, or not an Ed25519 private key."""


def new_key_pem() -> bytes:
    """A new Ed25519 private key, as PKCS #8 PEM (what ``receipts.key_file`` or ``HITL_RECEIPT_KEY`` holds)."""
    return OKPKey.generate_key("Ed25519", private=True).as_pem(private=True)


def public_pem(pem: bytes | str) -> bytes:
    """The public half of a key (private or public), as PEM: what ``receipts.previous`` names after a rotation, so
    no file but the signing key's holds what could sign."""
    return _import(pem, where="the key", private=False).as_pem(private=False)


def public_kid(pem: bytes | str) -> str:
    """The ``kid`` a key is published under: its RFC 7638 thumbprint (the same for its private and public parts)."""
    return _import(pem, where="the key", private=False).thumbprint()


def _import(pem: bytes | str, *, where: str, private: bool) -> OKPKey:
    try:
        key = OKPKey.import_key(pem)
    except (JoseError, ValueError, TypeError):
        raise KeyProblem(f"{where} is not an Ed25519 key in PEM form (`hitl keys new` writes one)") from None
    if key.as_dict(private=False).get("crv") != "Ed25519":
        raise KeyProblem(f"{where} is not an Ed25519 key (`hitl keys new` writes one)")
    if private and not key.is_private:
        raise KeyProblem(f"{where} holds a public key; receipts are signed with the private one")
    return key


class SigningKeys:
    """``current`` signs; ``next_key`` (the one that signs after the next rotation) and ``previous`` are only
    published. Each key's ``kid`` is its RFC 7638 thumbprint."""

    def __init__(
        self,
        current: OKPKey,
        previous: Sequence[OKPKey] = (),
        *,
        next_key: OKPKey | None = None,
        retired: Sequence[OKPKey] = (),
    ) -> None:
        self.current = current
        self.kid = current.thumbprint()
        self.next_key = next_key if next_key is not None and next_key.thumbprint() != self.kid else None
        published = {self.kid} | ({next_key.thumbprint()} if next_key is not None else set())
        self.previous = [k for k in previous if k.thumbprint() not in published]
        in_force = published | {k.thumbprint() for k in self.previous}
        self.retired = [k for k in retired if k.thumbprint() not in in_force]
        """Keys rotated out: published only in :meth:`history`, for the evidence records they signed."""
        self._header = {"alg": _ALG, "kid": self.kid, "typ": RECEIPT_TYPE}
        self._registry = _SigningRegistry(algorithms=[_ALG])  # built once: signing is on every execution claim

    def jwks(self) -> dict[str, Any]:
        """The JWKS document (RFC 7517) of every key a receipt in force may be signed with: public parts only."""
        return {
            "keys": [
                {**key.as_dict(private=False), "kid": key.thumbprint(), "alg": _ALG, "use": "sig"}
                for key in (self.current, *([self.next_key] if self.next_key else []), *self.previous)
            ]
        }

    def history(self) -> dict[str, Any]:
        """The keys history (a JWKS): every key this deployment lists, in force or retired, so an evidence record
        verifies after the key that signed it is rotated out."""
        listed = (self.current, *([self.next_key] if self.next_key else []), *self.previous, *self.retired)
        return {
            "keys": [{**k.as_dict(private=False), "kid": k.thumbprint(), "alg": _ALG, "use": "sig"} for k in listed]
        }

    def sign(self, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact JWS signed with the current key."""
        return jws.serialize_compact(self._header, orjson.dumps(dict(claims)), self.current, registry=self._registry)

    def sign_evidence(self, claims: Mapping[str, Any]) -> str:
        """An evidence record's ``claims`` as a compact JWS signed with the current key (``typ``
        ``hitl-evidence+jwt``: never taken for a receipt)."""
        header = {**self._header, "typ": EVIDENCE_TYPE}
        return jws.serialize_compact(header, orjson.dumps(dict(claims)), self.current, registry=self._registry)


def load_signing_keys(
    spec: ReceiptsSpec, *, environ: Mapping[str, str] = os.environ, base: Path | None = None
) -> SigningKeys:
    """The keys ``spec`` names: its ``key_file`` (relative to ``base``, the directory of ``hitl.yaml``) or the PEM
    in its ``key_env`` variable, and its ``next`` and ``previous`` files, of which only the public halves are kept
    (a private key under ``previous`` is logged: it belongs in no file another process might read).
    :class:`KeyProblem` saying what is wrong."""
    if spec.key_file is not None:
        current = _import(_read(spec.key_file, base), where=f"receipts.key_file {spec.key_file}", private=True)
    else:
        pem = environ.get(spec.key_env, "")
        if not pem.strip():
            raise KeyProblem(f"receipts has no key: set {spec.key_env} to a PEM (`hitl keys new`) or name key_file")
        current = _import(pem, where=f"${spec.key_env}", private=True)
    upcoming = None
    if spec.next is not None:
        upcoming = _public_half(_import(_read(spec.next, base), where=f"receipts.next {spec.next}", private=False))
    previous = []
    for name in spec.previous:
        key = _import(_read(name, base), where=f"receipts.previous {name}", private=False)
        if key.is_private:
            log.warning(
                "receipts.previous %s holds a private key; only its public half is published. Replace the file by "
                "its public half (`hitl keys public %s --out <file>`), or remove it from previous once the receipts "
                "it signed have expired: under production: true no other process starts while it can read it",
                name,
                name,
            )
        previous.append(_public_half(key))
    retired = [
        _public_half(_import(_read(name, base), where=f"receipts.retired {name}", private=False))
        for name in spec.retired
    ]
    return SigningKeys(current, previous, next_key=upcoming, retired=retired)


def _public_half(key: OKPKey) -> OKPKey:
    """``key`` without its private part: a key that only publishes never holds what could sign."""
    return OKPKey.import_key(key.as_dict(private=False))


def _read(name: str, base: Path | None) -> bytes:
    path = Path(name) if base is None or Path(name).is_absolute() else base / name
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyProblem(f"cannot read {path}: {exc.strerror or exc}") from None
