"""The public keys a receipt is checked against: a JWKS document (RFC 7517) held in hand (:class:`KeySet`), or one
fetched from the deployment's ``/.well-known/jwks.json`` and cached (:class:`RemoteKeys`). A receipt's own headers
never name where its key comes from: ``jku``, ``jwk`` and ``x5u`` are never read."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from hitl.receipts.failures import ReceiptError, ReceiptFailure

if TYPE_CHECKING:  # joserfc (and cryptography under it) is imported by the first key read: see KeySet
    from joserfc.jwk import OKPKey

__all__ = ["KeySet", "Keys", "RemoteKeys"]


class Keys(Protocol):
    """Where :func:`~hitl.receipts.verify` finds the key a receipt names (by its ``kid``)."""

    def key(self, kid: str) -> OKPKey | None:
        """The public key ``kid`` names, or None when there is none."""
        ...


class KeySet:
    """The Ed25519 keys of a JWKS document, by their ``kid`` (keys of another type, or without a ``kid``, are left
    out: a receipt is never checked with them)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        # Imported here, not with the module: `hitl serve` imports this package with `receipts:` off too, and
        # joserfc with cryptography cost it some 60 ms of CPU at each start for keys it never reads.
        from joserfc.errors import JoseError
        from joserfc.jwk import OKPKey

        found: dict[str, OKPKey] = {}
        for raw in document.get("keys") or []:
            if not isinstance(raw, dict) or raw.get("kty") != "OKP" or raw.get("crv") != "Ed25519":
                continue
            kid = raw.get("kid")
            public = {k: raw[k] for k in ("kty", "crv", "x") if k in raw}  # never a private part, whatever was sent
            try:
                key = OKPKey.import_key(public)
            except (JoseError, ValueError, TypeError):
                continue
            if isinstance(kid, str) and kid:
                found[kid] = key
        self.keys = found

    def key(self, kid: str) -> OKPKey | None:
        """The public key ``kid`` names, or None."""
        return self.keys.get(kid)


class RemoteKeys:
    """The JWKS at ``url``, fetched when first needed and again after ``max_age`` seconds; a ``kid`` it does not
    know fetches it again at once (a rotation), at most once every ``min_refetch`` seconds (a flood of made-up
    ``kid``s costs one fetch). Thread-safe. ``fetch`` replaces the HTTP GET (tests, a client of your own)."""

    def __init__(
        self,
        url: str,
        *,
        max_age: float = 300.0,
        min_refetch: float = 30.0,
        timeout: float = 5.0,
        fetch: Callable[[str], Mapping[str, Any]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.max_age = max_age
        self.min_refetch = min_refetch
        self.timeout = timeout
        self.fetches = 0
        """How many times the document was fetched."""
        self._fetch = fetch or self._get
        self._clock = clock
        self._set: KeySet | None = None
        self._at = float("-inf")
        self._lock = threading.Lock()

    def key(self, kid: str) -> OKPKey | None:
        """The public key ``kid`` names (fetching the document when it is stale or does not know ``kid``)."""
        with self._lock:
            now = self._clock()
            if self._set is None or now - self._at >= self.max_age:
                self._refresh(now)
            assert self._set is not None
            found = self._set.key(kid)
            if found is None and now - self._at >= self.min_refetch:
                self._refresh(now)
                found = self._set.key(kid)
            return found

    def _refresh(self, now: float) -> None:
        self.fetches += 1
        self._at = now  # a failed fetch waits its turn too: a flood never becomes a flood of fetches
        try:
            self._set = KeySet(self._fetch(self.url))
        except (OSError, ValueError) as exc:
            self._set = self._set or KeySet({})
            raise ReceiptError(
                ReceiptFailure.KEYS_UNAVAILABLE, f"could not fetch the keys at {self.url} ({exc}); nothing is accepted"
            ) from None

    def _get(self, url: str) -> Mapping[str, Any]:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310 - the configured https URL
            body = json.loads(resp.read(1_000_000))
        return body if isinstance(body, dict) else {}
