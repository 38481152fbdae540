"""An executed approval's evidence record, fetched from a running `hitl serve` by an auditor (its API, then `hitl
evidence` as a real CLI process), verified offline after the signing key was rotated out: with the keys history
the deployment publishes after the rotation (the old key under `receipts.retired`), by Node.js's jose and by PyJWT
in a fresh virtual environment, neither loading hitl."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import yaml

from hitl.engine.clocks import SystemClock
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts import args_sha256
from hitl.receipts.publishing import KEYS_HISTORY_PATH
from hitl.receipts.signing import new_key_pem, public_kid, public_pem
from tests.api.cli_process import hitl as run_hitl
from tests.bot.conftest import Harness, start, stop
from tests.receipts.conftest import AGENT, CONFIG, FIN1, api, approve, receipts_served

NODE = Path(__file__).parent / "node"

PYJWT_CHECK = """
import json, sys
import jwt
token, history = sys.argv[1], json.loads(open(sys.argv[2]).read())
header = jwt.get_unverified_header(token)
assert header["typ"] == "hitl-evidence+jwt", header
key = jwt.PyJWKSet.from_dict(history)[header["kid"]]
claims = jwt.decode(token, key, algorithms=["EdDSA"], options={"require": ["iss", "sub", "jti", "iat"]})
try:
    jwt.decode(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"), key, algorithms=["EdDSA"])
    tampered = "accepted"
except jwt.InvalidSignatureError:
    tampered = "refused"
print(json.dumps({"claims": claims, "tampered": tampered, "hitl": any(m.startswith("hitl") for m in sys.modules)}))
"""


async def _executed(h: Harness) -> tuple[dict[str, Any], str]:
    """An approval FIN1 approved on the view shown, claimed with its receipt and run: its view, and the receipt."""
    args = {"to": "V-9", "amount": 42}
    proposal = {"session": "ses_e", "tool": "pay", "args": args, "idempotency_key": "k-evidence"}
    pending = await api(h, "POST", "/proposals", AGENT, proposal)
    shown = await api(h, "GET", f"/approvals/{pending['approval']['id']}", FIN1)
    await approve(h, shown, on_view=True)
    key, claim = pending["execution_key"], {"action_hash": pending["approval"]["execute_hash"]}
    receipt = (await api(h, "POST", f"/executions/{key}/claim", AGENT, claim))["receipt"]
    status, refused = await _get(h, f"/approvals/{shown['id']}/evidence", FIN1)  # not run yet: no record
    assert status == 409 and refused["error"]["code"] == "not_executed", refused
    done = await api(h, "POST", f"/executions/{key}/outcome", AGENT, {"ok": True})
    assert done["status"] == "executed", done
    return shown, receipt


async def _fetched(h: Harness) -> tuple[dict[str, Any], str, str]:
    """An executed approval's view, its receipt, and its evidence record as the API and the CLI fetch it."""
    shown, receipt = await _executed(h)
    status, fetched = await _get(h, f"/approvals/{shown['id']}/evidence", FIN1)
    assert status == 200 and fetched["keys_history"] == f"https://hitl.example.com{KEYS_HISTORY_PATH}", fetched
    as_fin = {"HITL_API_URL": h.bot_url, "HITL_TOKEN": FIN1, "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, by_cli, err = await run_hitl("evidence", shown["id"], "--json", env=as_fin)
    assert code == 0 and by_cli["approval_id"] == shown["id"], (by_cli, err)
    return shown, receipt, str(fetched["evidence"])


async def _get(h: Harness, path: str, token: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with h.http.get(f"{h.bot_url}{path if path.startswith('/.') else '/api/v1' + path}", headers=headers) as r:
        return r.status, await (r.json(content_type=None) if r.status == 200 or not path.startswith("/.") else r.text())


def _pyjwt(tmp_path: Path, evidence: str, history: Path) -> dict[str, Any]:
    """PyJWT (with cryptography, for Ed25519) in a fresh virtual environment: nothing of hitl's there."""
    env_dir = tmp_path / "pyjwt"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check"]
    installed = subprocess.run([*pip, "pyjwt>=2.8", "cryptography>=42"], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    return _printed([str(python), "-I", "-c", PYJWT_CHECK, evidence, str(history)], tmp_path)


def _jose(evidence: str, history: Path) -> dict[str, Any]:
    return _printed(["node", str(NODE / "evidence.mjs"), evidence, str(history)], NODE)


def _printed(argv: list[str], cwd: Path) -> dict[str, Any]:
    """What an offline verifier run as its own process in ``cwd`` printed (JSON), after it exited 0."""
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


async def test_an_evidence_record_verifies_offline_after_its_key_is_rotated_out(tmp_path: Path) -> None:
    async with receipts_served(tmp_path, CONFIG) as hitl:
        shown, receipt, evidence = await _fetched(hitl)
    old_kid = public_kid((tmp_path / "receipt.pem").read_bytes())

    # The rotation: a new key signs; the old one's public half moves to receipts.retired (no receipt of it is in
    # force), so jwks.json drops it and only the keys history keeps it.
    (tmp_path / "old.pub.pem").write_bytes(public_pem((tmp_path / "receipt.pem").read_bytes()))
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    loaded = yaml.safe_load((tmp_path / "hitl.yaml").read_text())
    loaded["receipts"]["retired"] = ["old.pub.pem"]
    (tmp_path / "hitl.yaml").write_text(yaml.safe_dump(loaded))
    rotated = await start(SqliteStore(tmp_path / "hitl.db"), SystemClock(), config=tmp_path / "hitl.yaml")  # type: ignore[arg-type]
    try:
        _, jwks = await _get(rotated, "/.well-known/jwks.json", None)
        _, history = await _get(rotated, KEYS_HISTORY_PATH, None)
    finally:
        await stop(rotated)
    assert old_kid not in [k["kid"] for k in jwks["keys"]]
    assert old_kid in [k["kid"] for k in history["keys"]]
    kept = tmp_path / "history.json"
    kept.write_text(json.dumps(history))

    expected = {
        "iss": "https://hitl.example.com",
        "sub": shown["id"],
        "tool": "pay",
        "args_sha256": args_sha256({"to": "V-9", "amount": 42}),
        "requester": "agent:payer",
        "receipts": [json.loads(_b64(receipt.split(".")[1]))["jti"]],
    }
    alone = _pyjwt(tmp_path, evidence, kept)
    for claims in (_jose(evidence, kept)["claims"], alone["claims"]):
        assert {k: claims[k] for k in expected} == expected, claims
        assert "exp" not in claims  # a record, not a permission: it never expires
        deciders = claims["deciders"]
        assert [(d["id"], d["decision"], d["view_digest"]) for d in deciders] == [
            ("U_FIN1", "approve", shown["view_digest"])
        ]
        assert claims["decided_at"] == [deciders[0]["at"]] and claims["executed_at"] >= deciders[0]["at"]
    assert alone["tampered"] == "refused" and alone["hitl"] is False
    assert _jose(evidence, tmp_path / "history.json")["ok"] is True
    (tmp_path / "current.json").write_text(json.dumps(jwks))
    assert _jose(evidence, tmp_path / "current.json") == {"ok": False, "code": "ERR_JWKS_NO_MATCHING_KEY"}


def _b64(part: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


async def test_no_record_is_signed_from_a_trail_too_long_to_read_whole(hitl: Harness) -> None:
    # Refused clicks are audited under the approval: enough of them ahead of its receipt's issue would push the issue
    # past what the record reads, and a signed record would then say no receipt was issued. It is refused instead.
    from hitl.api.evidence import TRAIL_READ
    from hitl.engine.domain.records import AuditEntry

    proposal = {"session": "ses_f", "tool": "pay", "args": {"to": "V-8", "amount": 8}, "idempotency_key": "k-flood"}
    pending = await api(hitl, "POST", "/proposals", AGENT, proposal)
    approval_id, now = pending["approval"]["id"], hitl.clock.now()
    for i in range(TRAIL_READ):
        refused = AuditEntry(at=now, actor="U_X", event="refused", approval_id=approval_id, outcome="not_eligible")
        await hitl.service.store.audit.append(refused.model_copy(update={"detail": f"click {i}"}))
    shown = await api(hitl, "GET", f"/approvals/{approval_id}", FIN1)
    decision = {"decision": "approve", "expected_version": shown["version"], "action_hash": shown["action_hash"]}
    await api(hitl, "POST", f"/approvals/{approval_id}/decisions", FIN1, decision)
    key, claim = pending["execution_key"], {"action_hash": pending["approval"]["execute_hash"]}
    assert (await api(hitl, "POST", f"/executions/{key}/claim", AGENT, claim))["receipt"]
    assert (await api(hitl, "POST", f"/executions/{key}/outcome", AGENT, {"ok": True}))["status"] == "executed"
    status, refused_record = await _get(hitl, f"/approvals/{approval_id}/evidence", FIN1)
    assert status == 409 and refused_record["error"]["code"] == "trail_too_long", refused_record
