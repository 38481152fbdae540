"""Keys operators can run: `hitl keys new` writes an Ed25519 key only its owner reads; `hitl serve` publishes the
public keys at /.well-known/jwks.json (the current one and those kept for a rotation, cacheable); a production
deployment whose key cannot be read does not start."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts.signing import public_kid
from hitl.testing import FakeClock, make_approval
from tests.api.cli_process import hitl
from tests.bot.conftest import CONFIG, start, stop
from tests.ports import free_port
from tests.refund_config import write_refund_config

RECEIPTS = """
receipts:
  issuer: https://hitl.example.com
  key_file: {key}
  previous: [{old}]
  ttl: 2m
  tools:
    refund: {{audience: payments}}
"""


async def _new_key(path: Path) -> str:
    code, made, err = await hitl("keys", "new", "--out", str(path), "--json", env={})
    assert code == 0, err
    return str(made["kid"])


async def test_keys_new_writes_a_key_only_its_owner_reads_and_never_overwrites(tmp_path: Path) -> None:
    key = tmp_path / "receipt.pem"
    kid = await _new_key(key)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and kid == public_kid(key.read_bytes())
    before = key.read_bytes()
    code, _, err = await hitl("keys", "new", "--out", str(key), env={})
    assert code == 1 and "exists" in err and key.read_bytes() == before


async def test_serve_publishes_the_current_and_previous_public_keys(tmp_path: Path, clock: FakeClock) -> None:
    current, old = tmp_path / "current.pem", tmp_path / "old.pem"
    kids = [await _new_key(current), await _new_key(old)]
    config = tmp_path / "hitl.yaml"
    # the keys beside hitl.yaml
    write_refund_config(config, CONFIG.read_text() + RECEIPTS.format(key="current.pem", old="old.pem"))
    h = await start(SqliteStore(tmp_path / "s.db"), clock, config=config)
    try:
        async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("application/jwk-set+json")
            assert r.headers["Cache-Control"] == "public, max-age=300"
            published = (await r.json())["keys"]
    finally:
        await stop(h)
    assert [k["kid"] for k in published] == kids
    assert all(set(k) == {"kty", "crv", "x", "kid", "alg", "use"} and k["crv"] == "Ed25519" for k in published)


async def test_a_private_key_under_previous_is_published_by_its_public_half_only(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A rotation that left the old private key under previous, and the next key, published before it signs: hitl
    serve starts under production, publishes their public halves only, and says how to put the old key away."""
    current, upcoming, old = tmp_path / "current.pem", tmp_path / "next.pem", tmp_path / "old.pem"
    kids = [await _new_key(current), await _new_key(upcoming), await _new_key(old)]
    config = tmp_path / "hitl.yaml"
    receipts = RECEIPTS.format(key="current.pem", old="old.pem").replace("  previous:", "  next: next.pem\n  previous:")
    write_refund_config(config, CONFIG.read_text() + receipts + "production: true\n")
    with caplog.at_level(logging.WARNING, logger="hitl.receipts.signing"):
        h = await start(SqliteStore(tmp_path / "s.db"), clock, config=config)
    try:
        async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as r:
            published = (await r.json())["keys"]
        keys = h.rt.receipt_keys
        assert keys is not None and keys.kid == kids[0]  # the next key does not sign yet
        assert keys.next_key is not None and not any(k.is_private for k in [*keys.previous, keys.next_key])
    finally:
        await stop(h)
    assert [k["kid"] for k in published] == kids
    assert all(set(k) == {"kty", "crv", "x", "kid", "alg", "use"} for k in published)
    warned = [r.getMessage() for r in caplog.records if r.name == "hitl.receipts.signing"]
    assert len(warned) == 1 and "receipts.previous old.pem holds a private key" in warned[0], warned
    assert "hitl keys public old.pem" in warned[0]


async def test_without_receipts_there_are_no_keys_to_publish(tmp_path: Path, clock: FakeClock) -> None:
    h = await start(SqliteStore(tmp_path / "s.db"), clock)
    try:
        async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as r:
            assert r.status == 404 and "issues no receipts" in await r.text()
    finally:
        await stop(h)


async def test_production_with_an_unreadable_key_does_not_start(tmp_path: Path, clock: FakeClock) -> None:
    config = tmp_path / "hitl.yaml"
    text = CONFIG.read_text() + RECEIPTS.format(key="missing.pem", old="missing-too.pem")
    write_refund_config(config, text + "production: true\n")
    env = {
        "HITL_CONFIG": str(config),
        "HITL_STORE": f"sqlite:///{tmp_path / 's.db'}",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
        "SLACK_API_URL": "http://127.0.0.1:9/api/",  # never reached: it stops before
    }
    code, _, err = await hitl("serve", "--port", str(free_port()), env=env)
    assert code != 0 and "production: true and receipts are configured" in err and "cannot read" in err, err
    # not production: it starts, publishes none, and claims nothing a receipt would cover
    write_refund_config(config, text)
    h = await start(SqliteStore(tmp_path / "s2.db"), clock, config=config)
    try:
        assert h.rt.receipt_keys is None
        async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as r:
            assert r.status == 404
        approval = make_approval(now=clock.now(), tool="refund", args={"order_id": "R1", "amount": 40})
        with pytest.raises(EngineError) as refused:
            await h.service.receipts.claim(
                approval, approval.args, key="call:R1", action_hash="h", holder="w", lease=30
            )
        assert refused.value.code is ErrorCode.RECEIPT_UNAVAILABLE and "signing key" in str(refused.value)
        assert await h.rt.store.ledger.get("call:R1") is None  # nothing claimed: it runs once a key signs
    finally:
        await stop(h)


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ("receipts: {issuer: http://hitl.example.com}", "https URL"),
        ("receipts: {issuer: https://hitl.example.com, key_file: k.pem, key_env: K}", "key_file or key_env"),
        ("receipts: {issuer: https://hitl.example.com, ttl: 2d}", "less than or equal to 86400"),
        ("receipts: {issuer: https://hitl.example.com, tools: {pay: {always: maybe}}}", "boolean"),
    ],
)
def test_a_receipts_section_that_cannot_work_is_refused(section: str, says: str) -> None:
    with pytest.raises(EngineError) as err:
        parse_config(f"roles: {{support: [U1]}}\n{section}\n")
    assert says in str(err.value)
