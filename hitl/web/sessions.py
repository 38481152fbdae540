"""The web inbox's sessions and sign-ins under way, kept in this process's memory.

In memory, not in the store: a session is a browser's, short (30 minutes idle, 12 hours at most), and worth nothing
after a restart but a new sign-in; keeping it out of the store keeps bearer secrets out of backups and dumps. The
price: behind several replicas, a browser must reach the replica it signed in at (sticky sessions), and a restart
signs everyone out. Ids are 256-bit random values, only their SHA-256 is kept, and a session id is made at sign-in
only (a cookie presented before then is never adopted: no fixation).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field

from .oidc import random_token

__all__ = ["PendingSignIn", "Session", "SessionBook"]

SIGN_IN_TTL = 600.0
"""Seconds a sign-in may take at the provider before its state is forgotten."""
MAX_PENDING = 10_000
"""Sign-ins under way kept at most (anyone may start one): the oldest go first."""


def _key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


@dataclass
class Session:
    """A signed-in person: who (the reviewer id, and the ``(iss, sub)`` it came from), and the CSRF token of their
    forms."""

    reviewer: str
    issuer: str
    subject: str
    csrf: str
    created: float
    last_seen: float
    told: dict[str, str] = field(default_factory=dict)
    """What this person alone is to be told on an approval's page once, by approval id (a practice twin's note
    after they decided it, as Slack tells the decider alone)."""


@dataclass(frozen=True)
class PendingSignIn:
    """A sign-in sent to the provider: what the callback must match (``state`` is its key), the PKCE verifier,
    the nonce, the browser that started it (a cookie's hash), and where to go after."""

    nonce: str
    verifier: str
    browser: str
    return_to: str
    created: float


@dataclass
class SessionBook:
    """Sessions and sign-ins under way, with their expiry (``now``: the server's clock)."""

    now: Callable[[], float]
    idle: float
    absolute: float
    _sessions: dict[str, Session] = field(default_factory=dict)
    _pending: dict[str, PendingSignIn] = field(default_factory=dict)

    def begin(self, *, browser: str, return_to: str) -> tuple[str, PendingSignIn]:
        """A new sign-in: its ``state`` and what the callback checks."""
        now = self.now()
        for state in [s for s, p in self._pending.items() if now - p.created > SIGN_IN_TTL]:
            del self._pending[state]
        while len(self._pending) >= MAX_PENDING:
            del self._pending[next(iter(self._pending))]
        state = random_token()
        pending = PendingSignIn(random_token(), random_token(), _key(browser), return_to, now)
        self._pending[_key(state)] = pending
        return state, pending

    def finish(self, state: str, *, browser: str) -> PendingSignIn | None:
        """The sign-in ``state`` names, used up (a second callback with it finds nothing), or None when unknown,
        expired, or started in another browser."""
        pending = self._pending.pop(_key(state), None)
        if pending is None or self.now() - pending.created > SIGN_IN_TTL:
            return None
        if not hmac.compare_digest(pending.browser, _key(browser)):
            return None
        return pending

    def open(self, *, reviewer: str, issuer: str, subject: str) -> tuple[str, Session]:
        """A new session (always a new id) and its id, to set as the cookie."""
        now = self.now()
        for key in [k for k, s in self._sessions.items() if self._over(s, now)]:
            del self._sessions[key]  # sign-ins are rate-limited: this walk is as rare as they are
        sid = random_token()
        session = Session(reviewer, issuer, subject, random_token(), now, now)
        self._sessions[_key(sid)] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session ``sid`` names (its idle time starts again), or None: unknown, idle too long, or past
        its absolute end (then forgotten)."""
        if not sid:
            return None
        key = _key(sid)
        session = self._sessions.get(key)
        if session is None:
            return None
        now = self.now()
        if self._over(session, now):
            del self._sessions[key]
            return None
        session.last_seen = now
        return session

    def _over(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle or now - session.created >= self.absolute

    def end_where(self, ended: Callable[[Session], bool]) -> int:
        """End every session ``ended`` says must end (who it maps to changed); how many ended."""
        gone = [key for key, session in self._sessions.items() if ended(session)]
        for key in gone:
            del self._sessions[key]
        return len(gone)

    def revoke(self, sid: str | None) -> None:
        """End the session ``sid`` names (sign-out)."""
        if sid:
            self._sessions.pop(_key(sid), None)
