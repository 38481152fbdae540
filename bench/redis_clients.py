"""Redis clients on the store's hot call: EVALSHA of a small script (read and write one hash), as the decide and
commit scripts are called. The store's script calls (redis-py's connections and parser, with a pool and a packer of
their own: ``hitl.engine.storage.redis.calls``), redis-py's ``Redis.evalsha`` as the store called it before (a pool
that queues callers, no socket timeout: one deadline per store operation instead), as it was before that (with a
socket timeout), and on a plain pool, against coredis and valkey-glide, in interleaved rounds of the same run:
sequential latency, client CPU per call, and throughput at 50 concurrent callers. Needs the `bench` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, redis_server, row  # noqa: E402
from report import report  # noqa: E402

SCRIPT = "local v = redis.call('HINCRBY', KEYS[1], 'n', 1) return {tostring(v), ARGV[1]}"
Call = Callable[[str], Awaitable[Any]]


async def script_calls(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    """The store's own path: :class:`~hitl.engine.storage.redis.calls.ScriptCalls` on the store's client."""
    from hitl.engine.storage.redis import connect
    from hitl.engine.storage.redis.calls import ScriptCalls

    client = connect(url)
    sha = await client.script_load(SCRIPT)
    calls = ScriptCalls(client.connection_pool, size=64)

    async def call(key: str) -> Any:
        async with asyncio.timeout(5.0):  # the store's per-operation deadline
            return await calls.evalsha(sha, [key], ["x"])

    async def close() -> None:
        await calls.close()
        await client.aclose()

    return call, close


async def redis_py(url: str, tuned: bool, plain: bool = False) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis

    if tuned:
        from hitl.engine.storage.redis import connect

        client = connect(url)
    elif plain:
        client = Redis.from_pool(ConnectionPool.from_url(url, max_connections=4096, decode_responses=True))
    else:
        pool = BlockingConnectionPool.from_url(
            url, max_connections=64, timeout=None, socket_timeout=5.0, decode_responses=True
        )
        client = Redis.from_pool(pool)
    sha = await client.script_load(SCRIPT)

    async def call(key: str) -> Any:
        if tuned:
            async with asyncio.timeout(5.0):  # the store's per-operation deadline
                return await client.evalsha(sha, 1, key, "x")
        return await client.evalsha(sha, 1, key, "x")

    return call, client.aclose


async def coredis_client(port: int) -> tuple[Call, Callable[[], Awaitable[None]]]:
    import coredis

    stack = contextlib.AsyncExitStack()
    client: Any = await stack.enter_async_context(coredis.Redis(host="127.0.0.1", port=port, decode_responses=True))
    sha = await client.script_load(SCRIPT)

    async def call(key: str) -> Any:
        return await client.evalsha(sha, keys=[key], args=["x"])

    return call, stack.aclose


async def glide_client(port: int) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from glide import GlideClient, GlideClientConfiguration, NodeAddress

    client = await GlideClient.create(GlideClientConfiguration([NodeAddress("127.0.0.1", port)]))
    loaded = await client.custom_command(["SCRIPT", "LOAD", SCRIPT])
    sha = loaded.decode() if isinstance(loaded, bytes) else str(loaded)

    async def call(key: str) -> Any:
        return await client.custom_command(["EVALSHA", sha, "1", key, "x"])

    return call, client.close


async def sequential(call: Call, n: int) -> tuple[float, float]:
    """The median latency of ``n`` calls one after another, and this process's CPU per call (µs)."""
    times = []
    cpu = time.process_time()
    for i in range(n):
        t0 = time.perf_counter()
        await call(f"k{i % 100}")
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times), (time.process_time() - cpu) / n * 1e6


async def concurrent(call: Call, n: int, width: int = 50) -> float:
    it = iter(range(n))

    async def worker() -> None:
        for i in it:
            await call(f"k{i % 100}")

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return n / (time.perf_counter() - t0)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=2000, help="calls per contender per round")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    heading(f"Redis client benchmark: {a.rounds} interleaved rounds, {a.n} calls each ({os.cpu_count()} cores)")
    with redis_server() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        makers: dict[str, Callable[[], Awaitable[tuple[Call, Callable[[], Awaitable[None]]]]]] = {
            "hitl's script calls (the store's path)": lambda: script_calls(url),
            "redis-py Redis.evalsha, the store's client (its path before)": lambda: redis_py(url, True),
            "redis-py, blocking pool + socket timeout": lambda: redis_py(url, False),
            "redis-py, plain pool, no timeout": lambda: redis_py(url, False, plain=True),
            "coredis": lambda: coredis_client(port),
            "valkey-glide": lambda: glide_client(port),
        }
        clients = {}
        for label, make in makers.items():
            try:
                clients[label] = await make()
            except Exception as exc:  # a client that cannot run here is reported, not fatal
                heading(f"  {label}: unavailable ({type(exc).__name__}: {exc})")
        lat: dict[str, list[float]] = {k: [] for k in clients}
        cpu: dict[str, list[float]] = {k: [] for k in clients}
        rate: dict[str, list[float]] = {k: [] for k in clients}
        for call, _ in clients.values():
            await sequential(call, 300)  # warm-up
        for _ in range(a.rounds):
            for label, (call, _) in clients.items():
                median_us, cpu_us = await sequential(call, a.n)
                lat[label].append(median_us)
                cpu[label].append(cpu_us)
                rate[label].append(await concurrent(call, a.n * 2))
        for _, close in clients.values():
            await close()
    row("client: EVALSHA median latency, µs (min / median / max of rounds)", "", "")
    for label, r in lat.items():
        row(label, f"{min(r):.0f} / {statistics.median(r):.0f} / {max(r):.0f}", "")
    row("client: CPU of this process per sequential call, µs (min / median / max)", "", "")
    for label, r in cpu.items():
        row(label, f"{min(r):.0f} / {statistics.median(r):.0f} / {max(r):.0f}", "")
    row("client: calls/s at 50 concurrent (min / median / max)", "", "")
    for label, r in rate.items():
        row(label, f"{min(r):,.0f} / {statistics.median(r):,.0f} / {max(r):,.0f}", "")


if __name__ == "__main__":
    with report("redis_clients", "Redis clients on the store's call"):
        asyncio.run(main())
