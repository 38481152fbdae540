"""Slack's Web API rate limits, enforced by the stand-in as Slack enforces them.

Slack's rate-limit guide (docs.slack.dev/apis/web-api/rate-limits, checked in ``SLACK_NOTES.md``):

* limits apply per method, per app, per workspace, in tiers: Tier 2 "20+ per minute", Tier 3 "50+ per minute",
  Tier 4 "100+ per minute"; "bursts" are tolerated;
* ``chat.postMessage`` is special: "generally allows an app to post 1 message per second to a specific channel",
  short bursts allowed with "no guarantee", and "limits governing your app's relationship with the entire
  workspace above that, limiting posting to several hundred messages per minute" (modelled as 300);
* over a limit Slack answers HTTP 429 with ``Retry-After`` (seconds), and an app that keeps calling while limited
  risks its token: the stand-in counts those calls (:attr:`SlackLimits.early`).

Each limit is a token bucket refilled at the documented rate. Slack publishes no burst size, so the bucket's
capacity (:attr:`SlackLimits.burst`) is a setting; hitl's pacing must hold for any. The buckets read the
workspace's clock, so a test on a fake clock counts calls instead of waiting.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PER_MINUTE", "POSTS_PER_CHANNEL_PER_MINUTE", "POSTS_PER_WORKSPACE_PER_MINUTE", "SlackLimits"]

TIER_2, TIER_3, TIER_4 = 20.0, 50.0, 100.0
PER_MINUTE: dict[str, float] = {
    "chat.update": TIER_3,
    "chat.delete": TIER_3,
    "chat.postEphemeral": TIER_4,
    "chat.getPermalink": TIER_4,
    "conversations.history": TIER_3,
    "views.open": TIER_4,
    "views.update": TIER_4,
    "views.push": TIER_4,
    "views.publish": TIER_4,
    "users.info": TIER_4,
    "usergroups.users.list": TIER_2,
}
"""Each tiered method's documented rate (calls per minute, per app and workspace)."""
POSTS_PER_CHANNEL_PER_MINUTE = 60.0
"""``chat.postMessage``: about one message per second per channel."""
POSTS_PER_WORKSPACE_PER_MINUTE = 300.0
"""``chat.postMessage``: "several hundred messages per minute" across the workspace."""


@dataclass
class _Bucket:
    rate: float  # tokens per second
    capacity: float
    tokens: float
    at: float

    def refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)

    def wait(self) -> float:
        """Seconds until one token is there (0 when it is)."""
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate


@dataclass
class SlackLimits:
    """The workspace's rate limits for one app, on ``clock``."""

    clock: Callable[[], float]
    burst: int = 10
    """How many calls a bucket takes at once before its rate applies (Slack publishes none), for a rate of up to one
    call a second; a faster limit takes as many seconds' worth (:meth:`capacity`)."""
    limited: int = 0
    """Calls answered 429."""
    early: int = 0
    """Calls made while a ``Retry-After`` Slack gave for that method (and channel) was still running."""
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _held: dict[str, float] = field(default_factory=dict)

    def check(self, method: str, args: dict[str, Any]) -> int | None:
        """Take the call (None), or the ``Retry-After`` seconds of the 429 it gets."""
        now = self.clock()
        keys = self._keys(method, args)
        if any(self._held.get(key, 0.0) > now for key, _ in keys or [(method, 0.0)]):
            self.early += 1
        if not keys:
            return None
        buckets = [self._bucket(key, per_minute, now) for key, per_minute in keys]
        wait = max(b.wait() for b in buckets)
        if wait == 0.0:
            for b in buckets:
                b.tokens -= 1.0
            return None
        self.limited += 1
        retry_after = max(1, math.ceil(wait))
        for (key, _), b in zip(keys, buckets, strict=True):
            if b.wait() > 0.0:
                self._held[key] = max(self._held.get(key, 0.0), now + retry_after)
        return retry_after

    def hold(self, method: str, args: dict[str, Any], retry_after: int) -> None:
        """A 429 answered for another reason (a fault a test injected) holds the method as a limit would."""
        until = self.clock() + retry_after
        for key, _ in self._keys(method, args) or [(method, 0.0)]:
            self._held[key] = max(self._held.get(key, 0.0), until)

    @staticmethod
    def _keys(method: str, args: dict[str, Any]) -> list[tuple[str, float]]:
        if method == "chat.postMessage":
            channel = str(args.get("channel") or "")
            return [(f"{method}:{channel}", POSTS_PER_CHANNEL_PER_MINUTE), (method, POSTS_PER_WORKSPACE_PER_MINUTE)]
        if method in PER_MINUTE:
            return [(method, PER_MINUTE[method])]
        return []

    def capacity(self, per_minute: float) -> float:
        """The burst a limit of ``per_minute`` takes: :attr:`burst` seconds' worth, at least :attr:`burst`."""
        return self.burst * max(1.0, per_minute / 60.0)

    def _bucket(self, key: str, per_minute: float, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            size = self.capacity(per_minute)
            bucket = self._buckets[key] = _Bucket(per_minute / 60.0, size, size, now)
        bucket.refill(now)
        return bucket
