"""The store's script calls (``EVALSHA``), on connections of their own.

Every hot store operation is one Lua script, so this is the client's hot path. Sent through ``Redis.evalsha``, a
call paid for redis-py's general machinery on every round trip: the blocking pool's lock, condition and timeout, its
observability hooks (several awaits per command), the retry wrapper (with no retries configured) and the general
argument packer. Measured on the same client and server in ``bench/redis_clients.py``: 119 -> 70 µs of client CPU
per call, and 9,800 -> 21,800 calls/s at 50 concurrent callers.

What the general path gave that matters is kept: connections are redis-py's own (connecting, AUTH, TLS, RESP
parsing with hiredis, the client's ``decode_responses``); a connection disconnects itself on any failure or
cancellation while it sends or reads, so a half-read reply never reaches the next caller (such a connection is
dropped here, never reused); an idle connection the server closed is connected again before it is used, as the
pool did; an error reply is raised as redis-py raises it (``NoScriptError`` included); and the number of
connections is bounded: a burst beyond it waits for a free one, as the blocking pool made it wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["ScriptCalls", "pack"]


def pack(args: tuple[Any, ...], encode: Any) -> bytes:
    """One command in RESP: ``*N`` then each argument as a bulk string. Strings are UTF-8 (as redis-py encodes
    them); anything else goes through the client's own encoder (``encode``), which refuses what Redis cannot take
    (``None``, booleans) with redis-py's ``DataError``."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode() if type(arg) is str else encode(arg)
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class ScriptCalls:
    """At most ``size`` connections, made by ``pool`` (its class and settings), kept for script calls.

    Args:
        pool: the client's pool: its connection class and settings make the connections here (they are not the
            pool's: its other commands, pipelines and blocking reads never wait behind a script call).
        size: the most connections open at once; more callers wait for one to come back.
    """

    def __init__(self, pool: ConnectionPool, *, size: int) -> None:
        self._pool = pool
        self._encode = pool.get_encoder().encode  # type: ignore[no-untyped-call]
        self._idle: list[AbstractConnection] = []
        self._open = 0
        self._size = size
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def evalsha(self, sha: str, keys: list[str], args: list[Any]) -> Any:
        """``EVALSHA sha len(keys) *keys *args``: the script's reply, or its error reply raised."""
        conn = await self._take()
        try:
            await conn.send_packed_command(
                pack(("EVALSHA", sha, len(keys), *keys, *args), self._encode), check_health=False
            )
            return await conn.read_response()
        finally:
            # Still connected: the reply (or an error reply) was read whole, or nothing was sent. Any failure or
            # cancellation while sending or reading has disconnected it.
            await self._give(conn, conn.is_connected)

    async def close(self) -> None:
        """Disconnect the idle connections; those in use are disconnected as they come back."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn in idle:
            await conn.disconnect()

    async def _take(self) -> AbstractConnection:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Connections belong to the loop that opened them: a store used again from a new loop (closed on the
            # old one, as `asyncio.run` per command does) starts afresh there.
            self._loop, self._idle, self._open, self._waiters, self._closed = loop, [], 0, deque(), False
        while True:
            if self._idle:
                return await self._checked(self._idle.pop())
            if self._open < self._size:
                self._open += 1
                made: AbstractConnection = self._pool.make_connection()  # type: ignore[no-untyped-call]
                return made  # it connects on its first send
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled before it could take the connection: pass the turn on
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    @staticmethod
    async def _checked(conn: AbstractConnection) -> AbstractConnection:
        """An idle connection the server closed meanwhile (a restart, a client timeout, ``CLIENT KILL``) has its end
        of stream read already: disconnected here, it connects again on its send, so the call goes through instead
        of failing once per stale connection. (redis-py's pool checks what it hands out the same way; the check
        reads no socket.)"""
        # redis-py 8 names it can_read (can_read_destructive, deprecated there, before).
        check = getattr(conn, "can_read", None) or conn.can_read_destructive
        try:
            stale = bool(await check())
        except (RedisConnectionError, OSError):
            stale = True
        if stale:
            await conn.disconnect()
        return conn

    async def _give(self, conn: AbstractConnection, reusable: bool) -> None:
        if reusable and not self._closed:
            self._idle.append(conn)
        else:
            self._open -= 1
            await conn.disconnect()
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
