"""`hitl audit show`: the view each decider saw, as the audit keeps it, checked against its digest; `hitl audit
verify` covers the views, keeps passing after the renderer changes, and catches a view changed behind its back."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from hitl.engine.domain import presentation
from hitl.engine.domain.decide import NO_VIEW
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.records import AuditEntry, chain_link, entry_body
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.runtime.process import RuntimeSettings, open_runtime
from tests.cli.conftest import Cli
from tests.cli.test_refund_cli import run_refund


async def _decide_on_its_view(store: str, approval_id: str, reviewer: str) -> str:
    """Decide as a surface that showed the approval would: naming the digest of the view it drew."""
    async with open_runtime(RuntimeSettings.from_env(store=store)) as rt:
        a = await rt.store.approvals.get(approval_id)
        view = (await rt.lifecycle.context_of(a)).config.present(a)  # in the words of the run's hitl.yaml
        request = DecideRequest(a.id, reviewer, DecisionKind.APPROVE, via="test", view_digest=view.digest())
        await rt.lifecycle.decide(request, resume="inline")
        return view.digest()


def _db(env: dict[str, str]) -> Path:
    return Path(env["HITL_STORE"].removeprefix("sqlite:///"))


def test_audit_show_prints_what_each_decider_saw_and_checks_it(cli: Cli, env: dict[str, str]) -> None:
    large = str(run_refund(cli, "900")["approval_id"])  # two finance approvers
    seen = asyncio.run(_decide_on_its_view(env["HITL_STORE"], large, "U_FIN1"))
    assert cli("resume", large, "--approve", "--as", "U_FIN2").code == 0  # the CLI showed nothing

    shown = cli("audit", "show", large, "--json").json()
    first, second = shown["decisions"]
    assert shown["intact"] is True and (first["view_checks"], second["view_checks"]) == (True, None)
    assert first["view_digest"] == seen and first["view"]["approvals"] == 0 and first["view"]["status"] == "pending"
    assert "900" in first["view"]["heading"] and second["view"] is None and NO_VIEW in second["detail"]
    text = cli("audit", "show", large)
    assert text.code == 0 and "at version 1 (checked)" in text.out and first["view"]["heading"] in text.out
    assert text.out.count(NO_VIEW) == 2  # the second decision's detail and its "saw" line

    usage = cli("audit", "show")
    assert usage.code == 2 and "hitl audit show apr_" in usage.err
    assert cli("audit", "verify", large).code == 2  # one target at a time


def test_verify_keeps_passing_after_the_renderer_changes(
    cli: Cli, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    aid = str(run_refund(cli, "75")["approval_id"])
    seen = asyncio.run(_decide_on_its_view(env["HITL_STORE"], aid, "U_SUPPORT1"))
    # A later hitl draws views differently: the recorded view still checks, since it is checked as stored.
    monkeypatch.setattr(presentation, "RENDERER", "hitl-view/2")
    monkeypatch.setattr(presentation, "_headline", lambda a, summarize: f"Now reads: {a.tool}")
    assert cli("audit", "verify", "--json").json()["intact"] is True
    shown = cli("audit", "show", aid, "--json").json()
    assert shown["intact"] is True and shown["decisions"][0]["view"]["renderer"] == "hitl-view/1"
    assert shown["decisions"][0]["view_digest"] == seen


def test_a_view_changed_behind_hitls_back_is_caught(cli: Cli, env: dict[str, str]) -> None:
    aid = str(run_refund(cli, "75")["approval_id"])
    asyncio.run(_decide_on_its_view(env["HITL_STORE"], aid, "U_SUPPORT1"))
    with sqlite3.connect(_db(env)) as db:
        seq, prev, view = db.execute(
            "SELECT seq, prev, view FROM audit WHERE approval_id = ? AND event = 'decided'", (aid,)
        ).fetchone()
        last = db.execute("SELECT MAX(seq) FROM audit WHERE approval_id = ?", (aid,)).fetchone()[0]
    assert view is not None

    # Someone who can write the database edits what the decider saw (the amount) and, to hide it, the entry's
    # link and every later one's, and the chain's head: the chain holds, the view no longer matches its digest.
    forged = json.loads(view)
    forged["fields"] = [{**f, "text": "7.50"} if f["name"] == "amount" else f for f in forged["fields"]]
    with sqlite3.connect(_db(env)) as db:
        db.executescript("DROP TRIGGER audit_no_update;")
        db.execute("UPDATE audit SET view = ? WHERE seq = ?", (json.dumps(forged, ensure_ascii=False), seq))
        db.commit()
        assert cli("audit", "verify", "--json").json()["broken"]["reason"] == "the entry was changed"
        link = prev
        for row in db.execute(
            "SELECT seq, at, actor, event, approval_id, version, action_hash, outcome, detail, view_digest, view "
            "FROM audit WHERE approval_id = ? AND seq >= ? ORDER BY seq",
            (aid, seq),
        ).fetchall():
            fields = dict(zip(("seq", "at", "actor", "event", "approval_id", "version", "action_hash", "outcome",
                               "detail", "view_digest", "view"), row, strict=True))  # fmt: skip
            fields["view"] = json.loads(fields["view"]) if fields["view"] else None
            entry = AuditEntry.model_validate(fields)
            link, before = chain_link(link, entry_body(entry)), link
            db.execute("UPDATE audit SET prev = ?, link = ? WHERE seq = ?", (before, link, row[0]))
        db.execute("UPDATE audit_heads SET link = ? WHERE chain = ?", (link, aid))
        assert row[0] == last
    broken = cli("audit", "verify", "--json")
    assert broken.code == 1
    assert broken.json()["broken"]["reason"] == "the view recorded with the decision is not the one its digest names"
    shown = cli("audit", "show", aid)
    assert shown.code == 1 and "DOES NOT MATCH: the record was changed after the decision" in shown.out
