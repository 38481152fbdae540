"""Shared plumbing of the Redis store: the client, the Lua scripts, key names, one-round-trip calls."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisError

from engine.errors import (
    StoreError,
)

__all__ = ["RedisBase", "connect"]

_ANY_ROLE = "*"
_DYNAMIC_FIELDS = ["status", "version", "decisions", "reason", "approved_args", "superseded_by", "updated_at"]


def connect(url: str, *, max_connections: int = 64, socket_timeout: float = 5.0) -> Redis:
    """A client whose pool makes callers wait for a free connection instead of failing under load.

    Waiting for a pooled connection has no deadline of its own (each command still times out after
    ``socket_timeout``), which also keeps a timer off the hot path.
    """
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=None, socket_timeout=socket_timeout, decode_responses=True
    )
    return Redis.from_pool(pool)  # the client owns the pool and closes it in aclose()


def _lua(name: str) -> str:
    return resources.files("engine.storage").joinpath(f"lua/{name}.lua").read_text(encoding="utf-8")


class RedisBase:
    """Client, prefix and scripts; every part of :class:`~engine.storage.redis.RedisStore` builds on it."""

    def __init__(self, client: Redis, *, prefix: str = "hitl") -> None:
        self.r = client
        self.p = prefix
        self._decide: AsyncScript = client.register_script(_lua("decide"))
        self._transition: AsyncScript = client.register_script(_lua("transition"))
        self._create: AsyncScript = client.register_script(_lua("create"))
        self._claim: AsyncScript = client.register_script(_lua("claim"))
        self._finish: AsyncScript = client.register_script(_lua("finish"))
        self._window: AsyncScript = client.register_script(_lua("window"))
        self._checkpoint: AsyncScript = client.register_script(_lua("checkpoint"))

    # -- keys -------------------------------------------------------------------------------------------
    def _k(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}"

    def _ak(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}:audit"

    def _dk(self, approval_id: str) -> str:
        return f"{self.p}:{{{approval_id}}}:doc"

    def _keys(self, approval_id: str) -> list[str]:
        return [self._k(approval_id), self._ak(approval_id), self._dk(approval_id)]

    def _pending(self, role: str | None) -> str:
        return f"{self.p}:pending:{role or _ANY_ROLE}"

    async def _call(self, script: AsyncScript, keys: list[str], args: list[Any]) -> list[Any]:
        # EVALSHA directly: one round trip, and cheaper than redis-py's Script wrapper on the hot path.
        try:
            try:
                out = await self.r.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self.r.script_load(script.script)
                out = await self.r.evalsha(script.sha, len(keys), *keys, *args)
        except RedisError as exc:
            raise StoreError(f"Redis store failed: {exc}; nothing was applied") from exc
        return list(out)

    async def _pipeline(self, build: Callable[[Pipeline], None], scripts: list[AsyncScript]) -> list[Any]:
        """One round trip; loads the scripts once if the server lost them (restart, SCRIPT FLUSH)."""
        for attempt in (1, 2):
            try:
                async with self.r.pipeline(transaction=False) as pipe:
                    build(pipe)
                    return list(await pipe.execute())
            except NoScriptError:
                if attempt == 2:
                    raise
                for script in scripts:
                    await self.r.script_load(script.script)
            except RedisError as exc:
                raise StoreError(f"Redis store failed: {exc}; nothing was applied") from exc
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.r.aclose()

    def channel(self, approval_id: str) -> str:
        """Pub/sub channel on which the scripts announce every change of ``approval_id``."""
        return f"{self.p}:ev:{approval_id}"
