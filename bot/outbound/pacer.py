"""Pacing every Web API call within Slack's rate limits, so back-pressure stays in the bot.

Slack limits calls per method, app and workspace (``chat.postMessage`` about one a second per channel and a few
hundred a minute across the workspace; ``chat.update`` Tier 3, 50 a minute; ``views.*`` Tier 4, 100 a minute;
docs.slack.dev, "Rate limits"), and answers 429 with ``Retry-After`` beyond. The pacer keeps the bot under them:

* **Buckets.** Each limit is a token bucket on the injectable clock (a test on a fake clock counts calls instead
  of waiting). A small burst is allowed; Slack tolerates bursts but guarantees none.
* **Holds.** A 429 holds that method (and channel, for posts) for *every* task until ``Retry-After`` passes, and
  the hold is kept in the store (:class:`hitl.engine.ports.CallHolds`), so every replica (Redis, PostgreSQL) or
  every process on the file (SQLite) holds off too. slack_sdk's own retry handler sleeps for one call only.
* **Priorities.** An urgent call (a halt notice, an alert, ``views.open`` whose ``trigger_id`` lasts 3 s) goes
  before every waiting routine one: it never queues behind a backlog of cards.
* **One log line per episode**: the first 429 of a hold says what is held and for how long; the calls it holds
  say nothing.
* **Settled.** The pacer tells when nothing it paces can happen before the clock moves (:attr:`Pacer.settled`): a
  test moving a fake clock waits for that before each move, so simulated time passes only while the bot waits for
  it, never while the process waits for a CPU.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from hitl.engine.ports import CallHolds, Clock

__all__ = ["PER_MINUTE", "PacedClient", "Pacer", "urgent"]

log = logging.getLogger(__name__)

PER_MINUTE: dict[str, float] = {
    "chat.update": 50.0,
    "chat.delete": 50.0,
    "chat.postEphemeral": 100.0,
    "chat.getPermalink": 100.0,
    "conversations.history": 50.0,
    "views.open": 100.0,
    "views.update": 100.0,
    "views.push": 100.0,
    "views.publish": 100.0,
    "users.info": 100.0,
    "usergroups.users.list": 20.0,
}
"""Each tiered method's documented rate (Tier 2: 20, Tier 3: 50, Tier 4: 100 a minute)."""
POST = "chat.postMessage"
POSTS_PER_CHANNEL = 1.0
"""Posts a second into one channel, sustained."""
POSTS_PER_WORKSPACE = 200.0 / 60.0
"""Posts a second across the workspace: below Slack's "several hundred a minute"."""

_URGENT: contextvars.ContextVar[bool] = contextvars.ContextVar("hitl_slack_urgent", default=False)


@contextmanager
def urgent() -> Iterator[None]:
    """Calls made inside go before every routine call waiting for the same limit."""
    token = _URGENT.set(True)
    try:
        yield
    finally:
        _URGENT.reset(token)


@dataclass
class _Bucket:
    rate: float
    capacity: float
    tokens: float
    at: float

    def wait(self, now: float) -> float:
        """Seconds until a token is there, after refilling to ``now`` (0: there is one)."""
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate


@dataclass
class _Lane:
    """Calls waiting for one method (and channel): urgent first, then in arrival order."""

    limits: list[_Bucket]
    waiting: list[tuple[int, int]] = field(default_factory=list)
    moved: asyncio.Event = field(default_factory=asyncio.Event)


class Pacer:
    """Admits each Web API call when Slack's limits and any hold allow it.

    Args:
        clock: the injectable clock the buckets and holds run on.
        holds: where holds are shared (the store); None keeps them in this process.
        burst: calls a limit takes at once, for a rate up to one a second (faster limits: as many seconds' worth).
        tick: longest real pause between looks at the clock while waiting (a fake clock moves without telling).
        refresh: how often (real seconds) the store's holds are read again while calls are being made.
    """

    def __init__(
        self,
        clock: Clock,
        holds: CallHolds | None = None,
        *,
        burst: int = 3,
        tick: float = 0.1,
        refresh: float = 0.5,
    ) -> None:
        self.clock = clock
        self.holds = holds
        self.burst = burst
        self.tick = tick
        self.refresh = refresh
        self.limited = 0
        """429s answered to this process."""
        self.episodes = 0
        """Holds this process started (each logged once)."""
        self._buckets: dict[str, _Bucket] = {}
        self._held: dict[str, float] = {}
        self._shared: dict[str, float] = {}
        self._read_at = float("-inf")
        self._lanes: dict[str, _Lane] = {}
        self._seq = itertools.count()
        self._channel_ids: dict[str, str] = {}
        self._under_way = 0  # calls admitted that Slack has not answered yet
        self._workers: set[asyncio.Task[Any]] = set()  # tasks inside working()
        self._parked: dict[asyncio.Task[Any], int] = {}  # task -> its calls (or those lent) inside admit() or ready()
        self._lent: dict[asyncio.Task[Any], asyncio.Task[Any]] = {}  # a task making a call -> the task it is for
        self._looking: dict[asyncio.Task[Any], tuple[str, list[_Bucket]]] = {}  # ready()'s: its lane, its limits

    def channel_of(self, ref: str | None) -> str | None:
        """The channel ``ref`` names, by its id once Slack has told it (a card is posted to ``#name``, its thread
        replies to the id): one channel is one limit, however it is named."""
        return self._channel_ids.get(ref, ref) if ref else None

    def learned(self, ref: str, channel_id: str) -> None:
        """Slack answered a call naming ``ref`` with the channel's id."""
        if ref != channel_id and len(self._channel_ids) < 10_000:  # bounded: names come from hitl.yaml
            self._channel_ids[ref] = channel_id

    def clock_moved(self) -> None:
        """Wake every waiting call to look at the clock now (a fake clock was moved; a real one needs no help)."""
        for lane in self._lanes.values():
            lane.moved.set()

    @property
    def waiting(self) -> int:
        """Calls waiting for their turn."""
        return sum(len(lane.waiting) for lane in self._lanes.values())

    @property
    def settled(self) -> bool:
        """Nothing paced can happen until the clock moves: no call is under way (:meth:`under_way`), every
        worker (:meth:`working`) waits here, and no waiting call could be made at the clock's present time."""
        if self._under_way or any(not t.done() and not self._parked.get(t) for t in self._workers):
            return False
        now = self.clock.now()
        waits = [(key, lane.limits) for key, lane in self._lanes.items() if lane.waiting]
        return all(self._left(key, limits, now) > 0.0 for key, limits in [*waits, *self._looking.values()])

    @contextmanager
    def working(self) -> Iterator[None]:
        """The current task makes one call after another (a card poster with a queue): between its calls it counts
        as busy, so :attr:`settled` waits for it; while it waits here for its turn, it does not."""
        task = asyncio.current_task()
        if task is not None:
            self._workers.add(task)
        try:
            yield
        finally:
            if task is not None:
                self._workers.discard(task)

    def lend(self, task: asyncio.Task[Any]) -> None:
        """``task`` makes a call for the current task, which waits for it: while ``task`` waits here for its turn,
        so does the current task (a card poster whose post runs beside its claim's renewals)."""
        owner = asyncio.current_task()
        if owner is not None and not task.done():
            self._lent[task] = self._lent.get(owner, owner)
            task.add_done_callback(lambda done: self._lent.pop(done, None))

    @contextmanager
    def under_way(self) -> Iterator[None]:
        """An admitted call, until Slack has answered it (and a 429's hold is recorded)."""
        self._under_way += 1
        try:
            yield
        finally:
            self._under_way -= 1

    @contextmanager
    def _waiting_here(self, looking: tuple[str, list[_Bucket]] | None = None) -> Iterator[None]:
        """The current task waits in the pacer (for :attr:`settled`: parked, not busy)."""
        task = asyncio.current_task()
        if task is None:
            yield
            return
        owner = self._lent.get(task, task)
        self._parked[owner] = self._parked.get(owner, 0) + 1
        if looking is not None:
            self._looking[task] = looking
        try:
            yield
        finally:
            self._looking.pop(task, None)
            self._parked[owner] -= 1
            if not self._parked[owner]:
                del self._parked[owner]

    @staticmethod
    def lane(method: str, channel: str | None) -> str:
        """What a 429 holds: a post's method and channel, or any other method."""
        return f"{method}:{channel}" if method == POST and channel else method

    async def admit(self, method: str, channel: str | None = None, *, first: bool | None = None) -> None:
        """Wait until a call of ``method`` (into ``channel``) may be made, and count it. ``first``: go before
        routine calls (default: inside :func:`urgent`)."""
        limits = self._limits(method, channel)
        if not limits and method not in PER_MINUTE:
            return
        lane_key = self.lane(method, channel)
        lane = self._lanes.setdefault(lane_key, _Lane(limits))
        ticket = (0 if (first if first is not None else _URGENT.get()) else 1, next(self._seq))
        heapq.heappush(lane.waiting, ticket)
        try:
            with self._waiting_here():
                await self._take_turn(lane, lane_key, ticket, limits)
        finally:
            lane.waiting.remove(ticket)
            heapq.heapify(lane.waiting)
            lane.moved.set()
            if not lane.waiting:
                self._lanes.pop(lane_key, None)

    async def _take_turn(self, lane: _Lane, lane_key: str, ticket: tuple[int, int], limits: list[_Bucket]) -> None:
        """Wait until ``ticket`` is first in ``lane`` and its limits have a token, and take it."""
        while True:
            wait = await self._hold_left(lane_key)
            if wait <= 0.0 and lane.waiting[0] == ticket:
                now = self.clock.now()
                wait = max((b.wait(now) for b in limits), default=0.0)
                if wait <= 0.0:
                    for b in limits:
                        b.tokens -= 1.0
                    return
            elif wait <= 0.0:
                wait = self.tick  # another call is first in line: look again when it has gone
            lane.moved.clear()
            try:
                await asyncio.wait_for(lane.moved.wait(), timeout=min(wait, self.tick))
            except TimeoutError:
                pass

    async def ready(self, method: str, channel: str | None = None) -> None:
        """Wait until a call of ``method`` (into ``channel``) could be made now, taking nothing: a card poster
        waits here, then posts everything that queued meanwhile together (:mod:`hitl.bot.views.group_cards`)."""
        limits = self._limits(method, channel)
        lane_key = self.lane(method, channel)
        with self._waiting_here((lane_key, limits)):
            while True:
                now = self.clock.now()
                wait = max([await self._hold_left(lane_key), *(b.wait(now) for b in limits)])
                if wait <= 0.0:
                    return
                await asyncio.sleep(min(wait, self.tick))

    async def limited_by_slack(self, method: str, channel: str | None, retry_after: float) -> None:
        """Slack answered 429: hold the method (and channel) for every task, and every replica through the store."""
        self.limited += 1
        lane_key = self.lane(method, channel)
        now = self.clock.now()
        until = now + max(retry_after, 1.0)
        if await self._hold_left(lane_key) <= 0.0:
            self.episodes += 1
            where = f" in {channel}" if method == POST and channel else ""
            log.warning("Slack is rate-limiting %s%s: holding those calls for %g s", method, where, until - now)
        self._held[lane_key] = max(self._held.get(lane_key, 0.0), until)
        for b in self._limits(method, channel):
            b.tokens = min(b.tokens, 0.0)
        if self.holds is not None:
            try:
                await self.holds.hold(lane_key, until=until)
            except Exception as exc:  # the store is away: this process still holds off; the others learn by 429
                log.debug("could not share the hold on %s: %s", lane_key, exc)

    async def _hold_left(self, lane_key: str) -> float:
        """Seconds the hold on ``lane_key`` still runs (0 or less: none), by this process's or the store's."""
        if self.holds is not None:
            loop = asyncio.get_running_loop()
            if loop.time() - self._read_at >= self.refresh:
                self._read_at = loop.time()
                try:
                    self._shared = await self.holds.active(now=self.clock.now())
                except Exception as exc:  # the store is away: the holds this process knows still stand
                    log.debug("could not read the shared holds: %s", exc)
        return self._left(lane_key, [], self.clock.now())

    def _left(self, lane_key: str, limits: Sequence[_Bucket], now: float) -> float:
        """Seconds until a call in ``lane_key`` could be made at ``now``, by the holds this process knows (its own
        and the store's as last read) and ``limits``; 0 or less: now."""
        until = max(self._held.get(lane_key, 0.0), self._shared.get(lane_key, 0.0))
        return max([until - now, *(b.wait(now) for b in limits)])

    def _limits(self, method: str, channel: str | None) -> list[_Bucket]:
        if method == POST:
            pairs = [("post", POSTS_PER_WORKSPACE)]
            if channel:
                pairs.append((f"post:{channel}", POSTS_PER_CHANNEL))
        elif method in PER_MINUTE:
            pairs = [(method, PER_MINUTE[method] / 60.0)]
        else:
            return []
        return [self._bucket(key, rate) for key, rate in pairs]

    def _bucket(self, key: str, rate: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            size = self.burst * max(1.0, rate)
            bucket = self._buckets[key] = _Bucket(rate, size, size, self.clock.now())
        return bucket


class PacedClient(AsyncWebClient):
    """slack_sdk's Web API client with every call admitted by a :class:`Pacer` first, and a 429 held for all."""

    pacer: Pacer
    attempts: int = 6
    """Calls made for one request across 429s before its caller hears ``ratelimited`` (a card job retries)."""

    def __init__(self, *, pacer: Pacer, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pacer = pacer

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        body = kwargs.get("json") or kwargs.get("data") or kwargs.get("params") or {}
        named = body.get("channel") if isinstance(body, dict) else None
        channel = self.pacer.channel_of(str(named) if named else None)
        for attempt in range(1, self.attempts + 1):
            await self.pacer.admit(api_method, channel)
            with self.pacer.under_way():
                try:
                    resp = await super().api_call(api_method, **kwargs)
                    if named and isinstance(resp.get("channel"), str):
                        self.pacer.learned(str(named), str(resp["channel"]))
                    return resp
                except SlackApiError as exc:
                    if exc.response.status_code != 429:
                        raise
                    await self.pacer.limited_by_slack(api_method, channel, _retry_after(exc))
                    if attempt == self.attempts:
                        raise
        raise AssertionError("unreachable")  # the loop returns or raises


def _retry_after(exc: SlackApiError) -> float:
    headers = exc.response.headers or {}
    for key, value in headers.items():
        if str(key).lower() == "retry-after":
            try:
                return float(value[0] if isinstance(value, list) else value)
            except (TypeError, ValueError):
                break
    return 1.0
