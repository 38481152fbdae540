"""Through a running `hitl serve` (its API, its SQLite store, its key): a receipt names the view each approver
decided on (`view_digests`, the digest their decision's audit entry keeps); a decider or an admin withdraws an
approval whose receipt is unspent, and its receipt then fails redeem (409 `withdrawn`) and introspects so; a
withdrawal after the redeem is refused; introspection answers for the token's audience only."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import yaml

from hitl.api import token_hash
from hitl.engine.domain.display import reveal
from tests.api.cli_process import hitl as run_hitl
from tests.bot.conftest import Harness
from tests.bot.hostile import HOSTILE, batches, carried
from tests.bot.test_hostile_text import INVISIBLE, assert_inert
from tests.bot.test_withdraw_card import _approved_receipt as approved_on_card
from tests.bot.test_withdraw_card import _open_form, _reason
from tests.receipts.conftest import AGENT, FIN1, SERVICE, api, approve

FIN2, ADMIN, BANK = "tok-fin2-pay", "tok-admin-pay", "tok-bank-redeem"
FIN1_SUPPORT, ADMIN_SUPPORT, FIN1_FINANCE = "tok-fin1-support", "tok-admin-support", "tok-fin1-finance"


def _more_tokens(config: Path) -> None:
    """A second finance reviewer, an admin, and a protected system of another audience, in the running config."""
    loaded = yaml.safe_load(config.read_text())
    loaded["api"]["tokens"] += [
        {"name": "fin2", "sha256": token_hash(FIN2), "reviewer": "U_FIN2", "scopes": ["read", "decide"]},
        {"name": "admin", "sha256": token_hash(ADMIN), "reviewer": "ops:admin", "scopes": ["admin"]},
        {"name": "bank", "sha256": token_hash(BANK), "reviewer": "svc:bank", "scopes": ["redeem"], "audience": "bank"},
    ]
    config.write_text(yaml.safe_dump(loaded))


async def _call(h: Harness, path: str, token: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with h.http.post(f"{h.bot_url}/api/v1{path}", json=body, headers={"Authorization": f"Bearer {token}"}) as r:
        return r.status, await r.json()


def _claims(receipt: str) -> dict[str, Any]:
    body = receipt.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


async def _approved_receipt(h: Harness, key: str, *, amount: int = 12) -> tuple[dict[str, Any], str]:
    """An approval FIN1 approved on the view it was shown, and the receipt of its execution."""
    proposal = {"session": "ses_w", "tool": "pay", "args": {"to": "V-1", "amount": amount}, "idempotency_key": key}
    pending = await api(h, "POST", "/proposals", AGENT, proposal)
    shown = await api(h, "GET", f"/approvals/{pending['approval']['id']}", FIN1)
    await approve(h, shown, on_view=True)
    claim = {"action_hash": pending["approval"]["execute_hash"]}
    receipt = (await api(h, "POST", f"/executions/{pending['execution_key']}/claim", AGENT, claim))["receipt"]
    return shown, receipt


async def _trail(h: Harness, approval_id: str) -> list[dict[str, Any]]:
    """The approval's audit entries, oldest first (read with the admin token)."""
    return [e for e in (await api(h, "GET", "/audit", ADMIN))["entries"] if e["approval_id"] == approval_id]


async def test_a_receipt_names_the_view_each_approver_decided_on(hitl: Harness, tmp_path: Path) -> None:
    _more_tokens(tmp_path / "hitl.yaml")
    shown, receipt = await _approved_receipt(hitl, "k-view")
    claims = _claims(receipt)
    assert claims["view_digests"] == {"U_FIN1": shown["view_digest"]}, claims
    decided = [e for e in await _trail(hitl, shown["id"]) if e["event"] == "decided"]
    assert [e["view_digest"] for e in decided] == [shown["view_digest"]]


async def test_a_decider_withdraws_an_unspent_approval_and_its_receipt_is_refused(
    hitl: Harness, tmp_path: Path
) -> None:
    _more_tokens(tmp_path / "hitl.yaml")
    shown, receipt = await _approved_receipt(hitl, "k-withdraw")
    assert await _call(hitl, "/receipts/introspect", SERVICE, {"receipt": receipt}) == (200, {"status": "active"})
    path = f"/approvals/{shown['id']}/withdrawal"

    status, refused = await _call(hitl, path, FIN2, {"reason": "not mine to take back"})  # not a decider of it
    assert status == 403 and refused["error"]["code"] == "not_eligible", refused
    status, refused = await _call(hitl, path, AGENT, {"reason": "the agent may not"})  # no decide scope
    assert status == 403 and refused["error"]["code"] == "missing_scope", refused
    status, refused = await _call(hitl, path, FIN1, {"reason": ""})
    assert status == 422 and refused["error"]["code"] == "invalid_input", refused
    status, done = await _call(hitl, path, FIN1, {"reason": "the vendor's bank details changed"})
    assert status == 200 and done == {"approval_id": shown["id"], "withdrawn": True}, done

    status, refused = await _call(hitl, "/receipts/redeem", SERVICE, {"receipt": receipt})
    assert status == 409 and refused["error"]["code"] == "withdrawn", refused
    assert await _call(hitl, "/receipts/introspect", SERVICE, {"receipt": receipt}) == (200, {"status": "withdrawn"})
    trail = await _trail(hitl, shown["id"])
    withdrawn = [e for e in trail if e["event"] == "withdrawn"]
    assert [(e["actor"], e["detail"]) for e in withdrawn] == [
        ("U_FIN1", "withdrawal via api:fin1: the vendor's bank details changed")
    ]
    assert any(e["event"] == "refused" and e["outcome"] == "not_eligible" for e in trail)


async def test_an_admin_withdraws_too_and_a_spent_receipt_cannot_be_withdrawn(hitl: Harness, tmp_path: Path) -> None:
    _more_tokens(tmp_path / "hitl.yaml")
    first, receipt = await _approved_receipt(hitl, "k-admin", amount=13)
    status, done = await _call(hitl, f"/approvals/{first['id']}/withdrawal", ADMIN, {"reason": "fraud hold"})
    assert status == 200 and done["withdrawn"] is True, done

    second, spent = await _approved_receipt(hitl, "k-spent", amount=14)
    assert (await _call(hitl, "/receipts/redeem", SERVICE, {"receipt": spent}))[0] == 200
    assert await _call(hitl, "/receipts/introspect", SERVICE, {"receipt": spent}) == (200, {"status": "consumed"})
    status, refused = await _call(hitl, f"/approvals/{second['id']}/withdrawal", FIN1, {"reason": "too late"})
    assert status == 409 and refused["error"]["code"] == "receipt_spent", refused

    # Introspection answers only for the token's audience: another protected system learns nothing.
    status, refused = await _call(hitl, "/receipts/introspect", BANK, {"receipt": spent})
    assert status == 422 and refused["error"]["code"] == "invalid_receipt", refused
    status, refused = await _call(hitl, "/receipts/introspect", FIN1, {"receipt": spent})
    assert status == 403 and refused["error"]["code"] == "missing_scope", refused


async def test_a_decider_withdraws_from_the_cli_through_the_api(hitl: Harness, tmp_path: Path) -> None:
    _more_tokens(tmp_path / "hitl.yaml")
    shown, receipt = await _approved_receipt(hitl, "k-cli", amount=15)
    as_fin = {"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": FIN1, "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, body, err = await run_hitl("withdraw", shown["id"], "--reason", "wrong vendor", "--json", env=as_fin)
    assert code == 0 and body == {"approval_id": shown["id"], "withdrawn": True}, (body, err)
    status, refused = await _call(hitl, "/receipts/redeem", SERVICE, {"receipt": receipt})
    assert status == 409 and refused["error"]["code"] == "withdrawn", refused
    as_fin2 = {**as_fin, "HITL_TOKEN": FIN2}
    code, body, err = await run_hitl("withdraw", shown["id"], "--reason", "me too", "--json", env=as_fin2)
    assert code != 0 and body["error"]["code"] == "not_eligible", (body, err)
    assert [e["actor"] for e in await _trail(hitl, shown["id"]) if e["event"] == "withdrawn"] == ["U_FIN1"]


async def test_a_role_narrowed_token_withdraws_nothing_outside_its_roles(hitl: Harness, tmp_path: Path) -> None:
    # U_FIN1 decided it with the finance role; their token narrowed to another role (an admin's too) may not take
    # it back, as it could not have decided it: 403 not_eligible, audited, and the receipt stays active.
    config = tmp_path / "hitl.yaml"
    loaded = yaml.safe_load(config.read_text())
    loaded["roles"]["support"] = ["U_FIN1", "ops:admin"]
    loaded["api"]["tokens"] += [
        {"name": "fin1-support", "sha256": token_hash(FIN1_SUPPORT), "reviewer": "U_FIN1", "scopes": ["read", "decide"]}
        | {"roles": ["support"]},
        {"name": "admin-support", "sha256": token_hash(ADMIN_SUPPORT), "reviewer": "ops:admin", "scopes": ["admin"]}
        | {"roles": ["support"]},
        {"name": "fin1-finance", "sha256": token_hash(FIN1_FINANCE), "reviewer": "U_FIN1", "scopes": ["decide"]}
        | {"roles": ["finance"]},
    ]
    config.write_text(yaml.safe_dump(loaded))
    _more_tokens(config)
    shown, receipt = await _approved_receipt(hitl, "k-narrow", amount=16)
    path = f"/approvals/{shown['id']}/withdrawal"
    for token in (FIN1_SUPPORT, ADMIN_SUPPORT):
        status, refused = await _call(hitl, path, token, {"reason": "outside my token's roles"})
        assert status == 403 and refused["error"]["code"] == "not_eligible", refused
    as_narrowed = {"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": FIN1_SUPPORT, "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, body, err = await run_hitl("withdraw", shown["id"], "--reason", "from the CLI", "--json", env=as_narrowed)
    assert code != 0 and body["error"]["code"] == "not_eligible", (body, err)
    assert await _call(hitl, "/receipts/introspect", SERVICE, {"receipt": receipt}) == (200, {"status": "active"})
    trail = await _trail(hitl, shown["id"])
    assert not [e for e in trail if e["event"] == "withdrawn"]
    refused_by = [e["detail"] for e in trail if e["event"] == "refused" and e["outcome"] == "not_eligible"]
    assert refused_by == [
        "withdrawal via api:fin1-support: outside my token's roles",
        "withdrawal via api:admin-support: outside my token's roles",
        "withdrawal via api:fin1-support: from the CLI",
    ], refused_by
    # Nor does the admin token narrowed to support read it or its signed evidence: 404, as one that is not there
    # (an admin narrowed to nothing is told it has not run yet).
    read, evidence = f"/approvals/{shown['id']}", f"/approvals/{shown['id']}/evidence"
    expected = {
        (ADMIN_SUPPORT, read): (404, "not_found"),
        (ADMIN_SUPPORT, evidence): (404, "not_found"),
        (ADMIN, read): (200, None),
        (ADMIN, evidence): (409, "not_executed"),
    }
    for (token, where), answer in expected.items():
        async with hitl.http.get(f"{hitl.bot_url}/api/v1{where}", headers={"Authorization": f"Bearer {token}"}) as r:
            assert (r.status, (await r.json()).get("error", {}).get("code")) == answer, (token, where)

    status, done = await _call(hitl, path, FIN1_FINANCE, {"reason": "within the finance role"})
    assert status == 200 and done["withdrawn"] is True, done
    assert await _call(hitl, "/receipts/introspect", SERVICE, {"receipt": receipt}) == (200, {"status": "withdrawn"})


async def test_a_withdrawn_approval_gets_no_new_receipt_and_does_not_run(hitl: Harness, tmp_path: Path) -> None:
    # Withdrawn before anything claimed it: a receipt issued now would pass a verifier that checks offline only,
    # so no path hands one out, and nothing runs by the approval.
    _more_tokens(tmp_path / "hitl.yaml")
    proposal = {"session": "ses_w", "tool": "pay", "args": {"to": "V-2", "amount": 17}, "idempotency_key": "k-late"}
    pending = await api(hitl, "POST", "/proposals", AGENT, proposal)
    shown = await api(hitl, "GET", f"/approvals/{pending['approval']['id']}", FIN1)
    decision = {"decision": "approve", "expected_version": shown["version"], "action_hash": shown["action_hash"]}
    await api(hitl, "POST", f"/approvals/{shown['id']}/decisions", FIN1, decision)
    status, done = await _call(hitl, f"/approvals/{shown['id']}/withdrawal", FIN1, {"reason": "wrong vendor"})
    assert status == 200 and done["withdrawn"] is True, done

    key, digest = pending["execution_key"], pending["approval"]["execute_hash"]
    status, refused = await _call(hitl, f"/executions/{key}/claim", AGENT, {"action_hash": digest})
    assert status == 409 and refused["error"]["code"] == "action_rejected", refused
    assert "withdrawn" in refused["error"]["message"], refused
    status, refused = await _call(hitl, "/receipts/claim", AGENT, {"key": key, "action_hash": digest, "holder": "p"})
    assert status == 409 and refused["error"]["code"] == "action_rejected", refused
    assert await hitl.service.store.ledger.get(key) is None  # nothing claimed, no receipt issued
    assert (await api(hitl, "GET", f"/approvals/{shown['id']}", FIN1))["status"] == "approved"


def _withdrawable(text: str) -> bool:
    """Whether a withdrawal keeps ``text`` as its reason (1 to 500 characters once trimmed, no control character
    but line breaks and tabs): the rest are refused with invalid_input."""
    kept = text.strip()
    return carried(text) and 0 < len(kept) <= 500 and not any(ord(c) < 32 and c not in "\n\t" for c in kept)


async def test_every_hostile_withdrawal_reason_stays_inert_on_the_card_home_hitl_show_and_hitl_audit(
    hitl: Harness, tmp_path: Path
) -> None:
    # The hostile corpus as withdrawal reasons, a batch of them a reason: each drawn literally, its hidden, bidi and
    # line-separating characters marked, on the card, the Home tab and in both CLI commands that show it.
    _more_tokens(tmp_path / "hitl.yaml")
    kept = [t for t in HOSTILE if _withdrawable(t)]
    shown, _ = await _approved_receipt(hitl, "k-refused", amount=9)
    for text in (t for t in HOSTILE if carried(t) and not _withdrawable(t)):
        status, refused = await _call(hitl, f"/approvals/{shown['id']}/withdrawal", FIN1, {"reason": text})
        coded = (status, refused["error"]["code"])  # past the body limit, refused before it is read
        assert coded in ((422, "invalid_input"), (413, "body_too_large")), (text[:40], refused)
    assert not [e for e in await _trail(hitl, shown["id"]) if e["event"] == "withdrawn"]  # none changed anything

    withdrawn: dict[str, str] = {}
    for i, batch in enumerate(batches(kept, 400)):  # withdrawn from the card's form, so the card is drawn again
        approval_id, _ = await approved_on_card(hitl, f"k-hostile-{i}", 10 + i)
        view_id = await _open_form(hitl, approval_id, "U_FIN1")
        assert view_id is not None
        reason = "\n".join(batch)
        done = await hitl.slack.submit("U_FIN1", view_id, _reason(reason))
        assert done.status == 200 and done.json() is None, (reason[:60], done.json())
        withdrawn[approval_id] = reason.strip()
    assert len(kept) > 60 and any("\u202e" in r for r in withdrawn.values())
    assert any("\u2028" in r for r in withdrawn.values()) and any("\u200b" in r for r in withdrawn.values())
    await hitl.settle()
    for approval_id, reason in withdrawn.items():
        card = hitl.card_for(approval_id)
        assert_inert(card.blocks)
        [box] = [b for b in card.blocks if str(b.get("block_id", "")).startswith("hitl_withdrawn_reason:")]
        drawn = "".join(run["text"] for run in box["elements"][0]["elements"])
        assert drawn.rstrip("…")[:200] == reveal(reason, keep="\n\t")[0][:200], (drawn[:80], reason[:80])
    assert (await hitl.slack.home_opened("U_FIN1")).status == 200
    await hitl.rt.ctx.home.settled()
    assert_inert(hitl.state.homes["U_FIN1"]["blocks"])

    env = {"HITL_STORE": f"sqlite:///{tmp_path / 'hitl.db'}", "HITL_CONFIG": str(tmp_path / "hitl.yaml")}
    code, out, err = await run_hitl("show", *withdrawn, env=env)
    assert code == 0, err
    code, trail, err = await run_hitl("audit", "--limit", "500", env={**env, "COLUMNS": "400"})
    assert code == 0, err
    for printed in (out, trail):
        # No escape, bidi, hidden or line-separating character reaches a terminal: each is shown as [U+XXXX].
        assert not INVISIBLE.search(printed) and not re.search("[\u2028\u2029\u0085]", printed), repr(printed[:300])
    assert "[U+202E]" in out and "[U+2028]" in out, out[:3000]  # hitl show says who withdrew it and why
    assert "[U+202E]" in trail and "[U+2028]" in trail
