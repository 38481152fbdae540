"""Rotating the receipt signing key in two steps, as an operator does it: real `hitl serve` processes restarted on
one port with the edited hitl.yaml, keys from the real `hitl keys`, and two protected systems that fetched the
published keys before the switch: one in Node.js with jose's `createRemoteJWKSet` and its defaults (it fetches again
on an unknown kid only 30 s after its last fetch), one with hitl's `RemoteKeys` on a clock that never moves (it can
never fetch again). Both accept the first receipt the new key signs, because it was published before it signed."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from hitl.receipts import ReceiptError, ReceiptFailure, RemoteKeys, verify
from hitl.receipts.publishing import JWKS_PATH
from hitl.receipts.signing import SigningKeys, new_key_pem
from hitl.sandbox.server import start_emulator
from tests.api.cli_process import hitl as cli
from tests.bot.conftest import ROOT, serve_env, spawn_serve, wait_healthy, workspace
from tests.ports import free_port
from tests.processes import stopped
from tests.receipts.conftest import AGENT, CONFIG

NODE = ROOT / "tests" / "receipts" / "node"
ORDER = {"order": "78291"}


class NodeVerifier:
    """``tests/receipts/node/verify.mjs``: a Node.js service checking receipts with jose's remote key set, bound to
    one JWKS URL for its whole life."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def check(self, receipt: str) -> dict[str, Any]:
        """What it says of ``receipt``: ``ok`` with its ``kid`` and ``jti``, or jose's error ``code``; and
        ``fetches``, how many times jose has fetched the keys."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(receipt.encode() + b"\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)  # a guard against a hang, not a measure
        assert line, "the Node.js verifier exited"
        return dict(json.loads(line))


@asynccontextmanager
async def node_verifier(jwks: str) -> AsyncIterator[NodeVerifier]:
    """The Node.js verifier of the keys at ``jwks``, for the life of the block."""
    if not (NODE / "node_modules" / "jose").is_dir():
        pytest.fail("jose for Node.js is missing: `make test` installs it (scripts/ensure-node-jose)")
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(
        "node", str(NODE / "verify.mjs"), jwks, cwd=NODE, stdin=pipe, stdout=pipe
    )
    try:
        yield NodeVerifier(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def _new_key(path: Path) -> str:
    code, made, err = await cli("keys", "new", "--out", str(path), "--json", env={})
    assert code == 0, err
    return str(made["kid"])


async def _receipt(url: str, key: str) -> tuple[str, str]:
    """A receipt from the `hitl serve` at ``url`` (an agent's call the policy lets run: look_up, always
    receipted), and the kid it names."""
    proposal = {"session": "ses_rotation", "tool": "look_up", "args": ORDER, "idempotency_key": key}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/api/v1/proposals", json=proposal, headers={"Authorization": f"Bearer {AGENT}"}) as r,
    ):
        body = await r.json()
    assert r.status == 200 and body["verdict"] == "run", body
    receipt = str(body["receipt"])
    return receipt, str(jws.extract_compact(receipt.encode()).headers()["kid"])


async def _accepted_at_once(
    url: str, key: str, kid: str, node: NodeVerifier, frozen: RemoteKeys
) -> tuple[str, dict[str, Any]]:
    """A receipt the `hitl serve` at ``url`` signs with ``kid``, which both verifiers accept, neither fetching the keys
    again (each fetched them once, before): the receipt and its claims."""
    signed, signer = await _receipt(url, key)
    assert signer == kid
    claims = await asyncio.to_thread(verify, signed, tool="look_up", args=ORDER, keys=frozen)
    assert await node.check(signed) == {"ok": True, "kid": kid, "jti": claims["jti"], "fetches": 1}
    return signed, claims


@pytest.mark.slow
async def test_a_key_published_before_it_signs_is_accepted_by_verifiers_that_fetched_before_the_switch(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    old, new = await _new_key(tmp_path / "old.pem"), await _new_key(tmp_path / "new.pem")
    config = tmp_path / "hitl.yaml"
    config.write_text(CONFIG.replace("  key_file: receipt.pem\n", "  key_file: old.pem\n  next: new.pem\n"))
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path / 'hitl.db'}", config=config)
    frozen = RemoteKeys(f"{url}{JWKS_PATH}", clock=lambda: 0.0)  # never stale, never due to fetch again
    try:
        async with node_verifier(f"{url}{JWKS_PATH}") as node:
            # Step 1: the new key is published beside the old one, which still signs.
            first = spawn_serve(env, tmp_path, port, log="first.log")
            try:
                await wait_healthy(port, first)
                signed_before, _ = await _accepted_at_once(url, "k-1", old, node, frozen)
            finally:
                await stopped(first, grace=20)

            # Step 2, after the documented wait: the new key signs; the old one's public half stays published, and
            # no file but hitl serve's key_file holds a private key.
            public = ("keys", "public", str(tmp_path / "old.pem"), "--out", str(tmp_path / "old.pub.pem"))
            code, _, err = await cli(*public, env={})
            assert code == 0, err
            os.remove(tmp_path / "old.pem")
            config.write_text(
                CONFIG.replace("  key_file: receipt.pem\n", "  key_file: new.pem\n  previous: [old.pub.pem]\n")
            )
            second = spawn_serve(env, tmp_path, port, log="second.log")
            try:
                await wait_healthy(port, second)
                # Accepted at once, neither fetching the keys again: both knew the new key before it signed.
                signed_after, after = await _accepted_at_once(url, "k-2", new, node, frozen)
                assert frozen.fetches == 1
                # What the old key signed still verifies until it expires.
                assert (await node.check(signed_before))["ok"]
                await asyncio.to_thread(verify, signed_before, tool="look_up", args=ORDER, keys=frozen)

                # A kid nobody published fetches the keys again, at most once per cooldown however many come.
                now = [0.0]
                remote = RemoteKeys(f"{url}{JWKS_PATH}", clock=lambda: now[0], min_refetch=30)
                mallory = SigningKeys(OKPKey.import_key(new_key_pem()))
                forged = mallory.sign({**after, "jti": "rct_forged"})
                await asyncio.to_thread(verify, signed_after, tool="look_up", args=ORDER, keys=remote)
                for at in (1.0, 29.0, 31.0, 32.0, 60.0):
                    now[0] = at
                    for _ in range(20):
                        with pytest.raises(ReceiptError) as refused:
                            await asyncio.to_thread(verify, forged, tool="look_up", args=ORDER, keys=remote)
                        assert refused.value.code is ReceiptFailure.UNKNOWN_KEY
                assert remote.fetches == 2  # the first, and one at 31 s
            finally:
                await stopped(second, grace=20)
    finally:
        await emulator.close()
