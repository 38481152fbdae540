"""The Redis store's script calls on connections of their own (engine/storage/redis/calls.py), on a real server:
bounded, never handing on a connection cut off mid-reply, keeping one that read an error reply, closed cleanly."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import DataError, NoScriptError

from hitl.engine.storage.redis import connect
from hitl.engine.storage.redis.calls import ScriptCalls, pack
from tests.waiting import eventually

ECHO = "return ARGV[1]"
SLOW = "local t0 = redis.call('TIME') repeat local t = redis.call('TIME') until (t[1] - t0[1]) * 1e6 + (t[2] - t0[2]) > 300000 return ARGV[1]"  # noqa: E501


@pytest.fixture
async def named(redis_url: str) -> AsyncIterator[tuple[Redis, str]]:
    """A client whose connections carry a name of their own, so ``CLIENT LIST`` shows which are the test's."""
    name = f"calls-{uuid.uuid4().hex[:8]}"
    client = connect(f"{redis_url}?client_name={name}")
    yield client, name
    await client.aclose()


async def connections(client: Redis, name: str) -> list[str]:
    """The ids of the server's connections named ``name``."""
    return [str(c["id"]) for c in await client.client_list() if c.get("name") == name]


async def test_callers_beyond_the_bound_wait_for_a_connection(named: tuple[Redis, str], redis_url: str) -> None:
    client, name = named
    sha = await client.script_load(ECHO)  # on the client's own pool: one named connection already
    calls = ScriptCalls(client.connection_pool, size=3)
    observer = connect(redis_url)
    try:
        before = len(await connections(observer, name))
        answers = await asyncio.gather(*(calls.evalsha(sha, ["k"], [str(i)]) for i in range(40)))
        assert answers == [str(i) for i in range(40)]
        assert len(await connections(observer, name)) == before + 3
    finally:
        await calls.close()
        await observer.aclose()


async def test_a_call_cut_off_mid_reply_never_hands_its_connection_on(named: tuple[Redis, str]) -> None:
    client, _ = named
    slow, echo = await client.script_load(SLOW), await client.script_load(ECHO)
    calls = ScriptCalls(client.connection_pool, size=1)
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):  # gives up while the server still runs the script
                await calls.evalsha(slow, ["k"], ["late"])
        # The one connection allowed: a fresh one, not the one whose reply ("late") is still on its way.
        assert await calls.evalsha(echo, ["k"], ["mine"]) == "mine"
        assert await calls.evalsha(echo, ["k"], ["again"]) == "again"
    finally:
        await calls.close()


async def test_an_error_reply_leaves_its_connection_in_step(named: tuple[Redis, str], redis_url: str) -> None:
    client, name = named
    echo = await client.script_load(ECHO)
    calls = ScriptCalls(client.connection_pool, size=1)
    observer = connect(redis_url)
    try:
        assert await calls.evalsha(echo, ["k"], ["first"]) == "first"
        before = await connections(observer, name)
        with pytest.raises(NoScriptError):
            await calls.evalsha("0" * 40, ["k"], ["x"])
        assert await calls.evalsha(echo, ["k"], ["after"]) == "after"
        assert await connections(observer, name) == before  # the same connection, still in use
    finally:
        await calls.close()
        await observer.aclose()


async def test_closing_disconnects_the_idle_connections(named: tuple[Redis, str], redis_url: str) -> None:
    client, name = named
    echo = await client.script_load(ECHO)  # on the client's own pool, which stays open
    calls = ScriptCalls(client.connection_pool, size=4)
    observer = connect(redis_url)
    try:
        pool_own = await connections(observer, name)
        await asyncio.gather(*(calls.evalsha(echo, ["k"], ["x"]) for _ in range(8)))
        assert len(await connections(observer, name)) == len(pool_own) + 4
        await calls.close()

        async def only_the_pools() -> bool:
            return await connections(observer, name) == pool_own

        await eventually(only_the_pools, what="the server to see the script calls' connections closed")
    finally:
        await observer.aclose()


def test_arguments_are_packed_as_redis_py_packs_them() -> None:
    encode = connect("redis://127.0.0.1:1/0").connection_pool.get_encoder().encode  # type: ignore[no-untyped-call]
    assert pack(("EVALSHA", "ab", 1, "k", "é", 1.5, b"\x00"), encode) == (
        b"*7\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n1\r\n$1\r\nk\r\n$2\r\n\xc3\xa9\r\n$3\r\n1.5\r\n$1\r\n\x00\r\n"
    )
    for bad in (True, None):
        with pytest.raises(DataError):
            pack(("EVALSHA", bad), encode)


async def test_an_idle_connection_the_server_closed_connects_again_before_it_is_used(
    named: tuple[Redis, str], redis_url: str
) -> None:
    """A restart (or a client timeout, or ``CLIENT KILL``) closes idle connections: the next call goes through on
    a new one instead of failing on the old one."""
    client, name = named
    echo = await client.script_load(ECHO)
    calls = ScriptCalls(client.connection_pool, size=2)
    observer = connect(redis_url)
    try:
        await asyncio.gather(*(calls.evalsha(echo, ["k"], ["x"]) for _ in range(4)))
        await observer.client_kill_filter(_type="normal", skipme=True)  # every connection but the observer's

        async def all_closed() -> bool:
            return not await connections(observer, name)

        await eventually(all_closed, what="the server to close the script connections")
        assert await asyncio.gather(*(calls.evalsha(echo, ["k"], [str(i)]) for i in range(4))) == ["0", "1", "2", "3"]
    finally:
        await calls.close()
        await observer.aclose()


def test_a_store_closed_on_one_event_loop_works_again_on_the_next(redis_url: str) -> None:
    """``asyncio.run`` per command, one store object: each loop opens connections of its own, reuses them, and
    closes them."""
    client = connect(redis_url)
    calls = ScriptCalls(client.connection_pool, size=1)

    async def accepted() -> int:
        return int((await client.info("stats"))["total_connections_received"])

    async def once(value: str) -> tuple[list[str], int]:
        sha = await client.script_load(ECHO)  # the client's own pool has its connection from here on
        before = await accepted()
        answers = [str(await calls.evalsha(sha, ["k"], [f"{value}{i}"])) for i in range(3)]
        opened = await accepted() - before
        await calls.close()
        await client.connection_pool.disconnect()  # the client's own pool is bound to the loop too
        return answers, opened

    assert [asyncio.run(once(str(n))) for n in range(3)] == [
        (["00", "01", "02"], 1),  # one script connection a loop, used for all three calls
        (["10", "11", "12"], 1),
        (["20", "21", "22"], 1),
    ]
