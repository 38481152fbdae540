"""Production means authenticated, for oversight too: with ``production: true`` every oversight command that changes
state or shows oversight data (halt, unhalt, practice, reviewers, trust list and revoke) refuses a claimed ``--as``
against the store, and each refusal is an audit entry; the same commands work through the API with a token (the CLI
run as a real process against `hitl serve`)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hitl.testing import FakeClock
from tests.api.cli_process import hitl
from tests.api.conftest import TOKENS, Api, shop_api, trusted_refund
from tests.bot.conftest import ROOT
from tests.refund_config import write_refund_config

ADMIN = """
oversight:
  admin_role: ops
"""


@pytest.mark.parametrize(
    "command",
    [
        ("halt", "--tool", "refund"),
        ("unhalt", "--tool", "refund"),
        ("practice",),
        ("reviewers",),
        ("trust", "list"),
        ("trust", "revoke", "refund", "--session", "s1"),
        ("delegate", "give", "--to", "U_FIN2", "--until", "2030-01-01"),
        ("delegate", "end"),
        ("delegate", "list"),
    ],
)
async def test_production_refuses_a_claimed_identity_and_audits_it(tmp_path: Path, command: tuple[str, ...]) -> None:
    config = tmp_path / "hitl.yaml"
    roles = "\n  ops: [U_ADMIN]\n"
    text = (ROOT / "examples" / "refund" / "hitl.yaml").read_text().replace("roles:\n", "roles:" + roles, 1)
    write_refund_config(config, text + ADMIN + "production: true\n")
    db = tmp_path / "hitl.db"
    env = {"HITL_STORE": f"sqlite:///{db}", "HITL_CONFIG": str(config), "HITL_API_URL": "", "HITL_TOKEN": ""}
    code, _, err = await hitl("migrate", env=env)
    assert code == 0, err
    code, _, err = await hitl(*command, "--as", "U_ADMIN", env=env)
    assert code == 1 and "production: true" in err and "HITL_API_URL" in err, err
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT actor, event, outcome, detail FROM audit").fetchall()
        halts = c.execute("SELECT COUNT(*) FROM halts").fetchone()[0]
        delegations = c.execute("SELECT COUNT(*) FROM delegations").fetchone()[0]
    [(actor, event, outcome, detail)] = rows
    assert (actor, event, outcome) == ("cli", "refused", "production") and "as U_ADMIN" in detail
    assert halts == 0 and delegations == 0


async def test_oversight_commands_go_through_the_api_with_a_token(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch) as api:
        await _through_the_api(api)


async def _through_the_api(api: Api) -> None:
    env = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": TOKENS["admin"][0], "HITL_STORE": "sqlite:///nonexistent/x.db"}
    await trusted_refund(api)

    code, listed, err = await hitl("trust", "list", "--json", env=env)
    assert code == 0, err
    assert [(g["tool"], g["requester"], g["session_id"]) for g in listed["grants"]] == [
        ("refund", "agent:remote", "s1")
    ]
    code, done, err = await hitl("trust", "revoke", "refund", "--session", "s1", "--json", env=env)
    assert code == 0 and done == {"revoked": 1}, err
    code, _, err = await hitl("trust", "revoke", "refund", "--session", "s1", env=env)
    assert code == 1 and "not trusted" in err

    code, halted, err = await hitl("halt", "--tool", "refund", "--reason", "fixing", "--json", env=env)
    assert code == 0 and halted["halt"]["by"] == "U_SUPPORT2", err  # the token's identity, not a claimed one
    code, lifted, err = await hitl("unhalt", "--tool", "refund", "--json", env=env)
    assert code == 0 and lifted["status"] == "unhalted", err
    code, figures, err = await hitl("reviewers", "--json", env=env)
    assert code == 0 and [r["reviewer"] for r in figures["reviewers"]] == ["U_SUPPORT1"], err
    code, practice, err = await hitl("practice", "--json", env=env)
    assert code == 0 and practice == {"practice": []}, err

    # Delegation through the API: the token says who delegates (U_FIN1), whatever the CLI claims.
    fin1, sup1 = {**env, "HITL_TOKEN": TOKENS["fin1"][0]}, {**env, "HITL_TOKEN": TOKENS["sup1"][0]}
    give = ("delegate", "give", "--to", "U_SUPPORT1", "--until", "2027-01-20", "--tz", "Europe/Paris", "--json")
    code, given, err = await hitl(*give, env=fin1)
    assert code == 0 and (given["delegator"], given["via"]) == ("U_FIN1", "api"), err
    assert given["until"].startswith("2027-01-20T23:00")  # the end of that day in Paris, in UTC
    code, listed, err = await hitl("delegate", "list", "--json", env=sup1)
    assert code == 0 and [d["id"] for d in listed["delegations"]] == [given["id"]], err
    code, _, err = await hitl(*give[:-1], env=fin1)
    assert code == 1 and "already delegates" in err
    code, ended, err = await hitl("delegate", "end", "--json", env=fin1)
    assert code == 0 and ended["ended_by"] == "U_FIN1", err
    code, _, err = await hitl("delegate", "end", env=fin1)
    assert code == 1 and "no delegation" in err

    reader = {**env, "HITL_TOKEN": TOKENS["reader"][0]}
    code, _, err = await hitl("halt", "--tool", "refund", env=reader)
    assert code != 0 and "admin" in err  # refused by the server, and audited there
    refused = [e for e in await api.h.rt.runtime.store.audit.entries(limit=500) if e.event == "refused"]
    assert [(e.actor, e.outcome) for e in refused] == [("U_SUPPORT2", "missing_scope")]


async def test_the_cli_delegates_against_the_store_as_the_reviewer_it_names(tmp_path: Path) -> None:
    db = tmp_path / "hitl.db"
    config = ROOT / "examples" / "refund" / "hitl.yaml"
    env = {"HITL_STORE": f"sqlite:///{db}", "HITL_CONFIG": str(config), "HITL_API_URL": "", "HITL_TOKEN": ""}
    soon = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    give = ("delegate", "give", "--to", "U_SUPPORT1", "--until", soon, "--role", "finance", "--json")
    code, given, err = await hitl(*give, "--as", "U_FIN1", env=env)
    assert code == 0 and (given["delegator"], given["role"], given["via"]) == ("U_FIN1", "finance", "cli"), err
    assert given["until"].startswith(f"{(datetime.now(UTC) + timedelta(days=4)).date().isoformat()}T00:00")
    code, listed, err = await hitl("delegate", "list", "--as", "U_SUPPORT1", "--json", env=env)
    assert code == 0 and [d["delegator"] for d in listed["delegations"]] == ["U_FIN1"], err
    # Never re-delegated: finance was handed to U_SUPPORT1, not theirs to hand on.
    code, _, err = await hitl(*give[:3], "U_SUPPORT2", *give[4:-1], "--as", "U_SUPPORT1", env=env)
    assert code == 1 and "does not hold the role 'finance'" in err
    far = (datetime.now(UTC) + timedelta(days=40)).date().isoformat()
    code, _, err = await hitl("delegate", "give", "--to", "U_FIN2", "--until", far, "--as", "U_FIN3", env=env)
    assert code == 1 and "at most 30 days" in err
    code, ended, err = await hitl("delegate", "end", given["id"], "--as", "U_SUPPORT1", "--json", env=env)
    assert code == 0 and ended["ended_by"] == "U_SUPPORT1", err  # the delegate may hand it back
    with sqlite3.connect(db) as c:
        trail = c.execute("SELECT actor, event FROM audit WHERE event LIKE 'delegat%' ORDER BY seq").fetchall()
    assert trail == [("U_FIN1", "delegated"), ("U_SUPPORT1", "delegation_ended")]


async def test_the_cli_refuses_a_delegate_and_an_end_no_date_holds_in_one_coded_line(tmp_path: Path) -> None:
    db = tmp_path / "hitl.db"
    config = ROOT / "examples" / "refund" / "hitl.yaml"
    env = {"HITL_STORE": f"sqlite:///{db}", "HITL_CONFIG": str(config), "HITL_API_URL": "", "HITL_TOKEN": ""}
    soon = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    nobody = (
        "'U_NOBODY' is neither a reviewer hitl.yaml's roles list nor an active person of the Slack workspace; name a "
        "colleague by their reviewer id (e.g. U024BE7LH)"
    )
    refused = {
        ("--to", "U_NOBODY", "--until", soon): ("invalid_delegate", nobody),
        ("--to", "agent:riley", "--until", soon): ("invalid_delegate", "the agent's identity (hitl.yaml requester:)"),
        ("--to", "<@U_SUPPORT1|sup>", "--until", soon): ("invalid_delegate", "is mention markup, not an id"),
        ("--to", "U_SUPPORT1", "--until", "9999-12-31"): ("invalid_input", "beyond what a date holds"),
        ("--to", "U_SUPPORT1", "--until", "9999-12-31 23:59", "--tz", "America/Los_Angeles"): (
            "invalid_input",
            "beyond what a date holds",
        ),
        ("--to", "U_SUPPORT1", "--until", "0001-01-01 00:00", "--tz", "Asia/Tokyo"): (
            "invalid_input",
            "beyond what a date holds",
        ),
        ("--to", "U_SUPPORT1", "--until", "10000-01-01"): ("invalid_input", "is not a date"),
    }
    for args, (code_name, words) in refused.items():
        code, out, err = await hitl("delegate", "give", *args, "--as", "U_FIN1", env=env)
        assert code == 1 and "Traceback" not in err and out == "", (args, err)
        [line] = err.strip().splitlines()  # one line: what went wrong, what to do, the code
        assert words in line and line.endswith(f"[{code_name}]"), (args, line)
    code, out, _ = await hitl(
        "delegate", "give", "--to", "U_NOBODY", "--until", soon, "--as", "U_FIN1", "--json", env=env
    )
    assert code == 1 and out["error"] == {"code": "invalid_delegate", "message": nobody}, out
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM delegations").fetchone()[0] == 0
