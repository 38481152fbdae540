"""The `hitl` CLI as an API client (HITL_API_URL + HITL_TOKEN), run as a real process against `hitl serve`'s API;
and `production: true` refusing decisions made straight against the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.cli.remote import remote_from_env
from hitl.engine.errors import EngineError, ErrorCode
from tests.api.cli_process import hitl
from tests.api.conftest import TOKENS, Api, refund_proposal
from tests.bot.conftest import ROOT
from tests.refund_config import write_refund_config

REFUND = {"order_id": "78291", "customer_id": "C-1", "amount": 120}


def as_token(api: Api, name: str) -> dict[str, str]:
    # No store and no config: everything the CLI knows comes through the API.
    return {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": TOKENS[name][0], "HITL_STORE": "sqlite:///nonexistent/x.db"}


async def test_a_reviewer_decides_from_the_cli_through_the_api(api: Api) -> None:
    status, proposal = await api.call("POST", "/proposals", as_="agent", json=refund_proposal("s1", "k1", REFUND))
    assert status == 200
    approval_id = proposal["approval"]["id"]

    code, listed, err = await hitl("pending", "--json", env=as_token(api, "sup1"))
    assert code == 0, err
    assert [a["id"] for a in listed["pending"]] == [approval_id]
    code, listed, _ = await hitl("pending", "--json", env=as_token(api, "fin1"))
    assert code == 0 and listed["pending"] == []  # the token's reviewer is not in the support role

    code, shown, _ = await hitl("show", approval_id, "--json", env=as_token(api, "reader"))
    assert code == 0 and shown["id"] == approval_id and shown["args"]["amount"] == 120

    code, body, err = await hitl("resume", approval_id, "--approve", "--json", env=as_token(api, "reader"))
    assert code == 1 and "lacks the decide scope" in body["error"]["message"], (body, err)
    code, body, err = await hitl(
        "resume", approval_id, "--approve", "--as", "U_FIN1", "--json", env=as_token(api, "sup1")
    )
    assert code == 2 and "U_FIN1" in err and "acts as U_SUPPORT1" in err, err  # the token, not --as, says who acts
    code, body, err = await hitl("resume", approval_id, "--approve", "--json", env=as_token(api, "sup1"))
    assert code == 0, err
    assert body["approval"]["status"] == "approved"
    assert body["status"] == "approved" and body["run"] is None  # an agent's approval: only the decision was taken
    assert "runs the call when it next checks" in body["next"]
    assert body["approval"]["decisions"][0]["reviewer"] == "U_SUPPORT1"  # the token's identity
    assert body["approval"]["decisions"][0]["via"] == "api:sup1"

    code, trail, _ = await hitl("audit", approval_id, "--json", env=as_token(api, "reader"))
    # the refund's consequence is computed (and audited) before anyone is asked
    assert code == 0 and [e["event"] for e in trail["audit"]][:3] == ["consequence", "created", "decided"]
    code, body, _ = await hitl("audit", "--json", env=as_token(api, "reader"))
    assert code == 1 and "admin" in body["error"]["message"]  # the whole trail is for admins
    code, trail, _ = await hitl("audit", "--json", env=as_token(api, "admin"))
    assert code == 0 and any(e["approval_id"] == approval_id for e in trail["audit"])

    code, _, err = await hitl("pending", env={**as_token(api, "sup1"), "HITL_TOKEN": "wrong"})
    assert code == 1 and "Bearer" in err


async def test_every_command_through_the_api_says_where_it_asks_and_as_whom(api: Api) -> None:
    """The newcomer's trap: the agent's HITL_API_URL and HITL_TOKEN still exported, a reviewer's `--as` was silently
    ignored and the agent's empty queue printed. Now every command says which address and identity it uses (one
    line on stderr), and an `--as` the token does not act as stops it (exit 2), naming both and what to do."""
    status, proposal = await api.call("POST", "/proposals", as_="agent", json=refund_proposal("s-who", "k-who", REFUND))
    assert status == 200
    approval_id = proposal["approval"]["id"]
    agent = as_token(api, "agent")
    line = f"hitl: asking {api.h.bot_url} as agent:remote (token agent: …gent)"

    code, out, err = await hitl("pending", "--as", "U_SUPPORT1", "--config", str(api.config), env=agent)
    assert code == 2 and out == "", (out, err)
    [said] = [x for x in err.splitlines() if x.startswith("error: ")]
    assert "--as" in said and "HITL_TOKEN acts as agent:remote (token agent)" in said, said
    assert "not as U_SUPPORT1" in said, said
    assert "unset HITL_API_URL and HITL_TOKEN" in said and "a token of U_SUPPORT1's" in said, said
    assert said.endswith("[usage]") and "Traceback" not in err

    for argv in (["pending"], ["show", approval_id], ["audit", approval_id], ["trust", "list"]):
        code, out, err = await hitl(*argv, env=agent)
        assert code == 0, (argv, err)
        assert err.splitlines()[0] == line, (argv, err)  # said first, once, whatever the command prints
        assert err.count("hitl: asking") == 1
    code, listed, err = await hitl("pending", "--as", "U_SUPPORT1", "--json", env=as_token(api, "sup1"))
    assert code == 0 and [a["id"] for a in listed["pending"]] == [approval_id], err  # --as agreeing: fine
    assert err.splitlines() == [f"hitl: asking {api.h.bot_url} as U_SUPPORT1 (token sup1: …rt-1)"]
    code, _, err = await hitl("resume", approval_id, "--approve", "--as", "U_SUPPORT2", env=as_token(api, "sup1"))
    assert code == 2 and "acts as U_SUPPORT1" in err, err
    code, shown, _ = await hitl("show", approval_id, "--json", env=agent)
    assert code == 0 and shown["status"] == "pending"  # the refused decision recorded nothing

    code, _, err = await hitl("pending", env={**agent, "HITL_API_URL": "", "HITL_TOKEN": ""})
    assert "hitl: asking" not in err  # acting on the store says nothing of an API


async def test_resuming_a_run_through_the_api_waits_for_the_server_to_continue_it(api: Api) -> None:
    api.h.rt.background.start()  # `hitl serve` continues runs in its background loop
    status, run = await api.call(
        "POST", "/runs", as_="agent", json={"workflow": "refund", "vars": {"order_id": "78291", "amount": 120}}
    )
    assert status == 201
    code, body, err = await hitl("resume", run["session_id"], "--approve", "--json", env=as_token(api, "sup1"))
    assert code == 0, (err, body)
    assert body["status"] == "completed" and body["session_id"] == run["session_id"]


async def test_production_refuses_local_decisions_and_auto_approve(tmp_path: Path) -> None:
    config = tmp_path / "hitl.yaml"
    write_refund_config(config, (ROOT / "examples" / "refund" / "hitl.yaml").read_text() + "production: true\n")
    env = {
        "HITL_STORE": f"sqlite:///{tmp_path}/hitl.db",
        "HITL_CONFIG": str(config),
        "SHOP_DB": str(tmp_path / "shop.db"),
        "HITL_API_URL": "",
        "HITL_TOKEN": "",
    }
    workflow = str(ROOT / "examples" / "refund" / "workflow.yaml")
    code, _, err = await hitl(
        "run", workflow, "--var", "order_id=78291", "--var", "amount=75", "--auto-approve", env=env
    )
    assert code == 1 and "production: true" in err and "--auto-approve" in err, err
    code, paused, err = await hitl("run", workflow, "--var", "order_id=78291", "--var", "amount=75", "--json", env=env)
    assert code == 4, err
    code, _, err = await hitl("resume", paused["approval_id"], "--approve", "--as", "U_SUPPORT1", env=env)
    assert code == 1 and "HITL_API_URL" in err, err
    code, still, _ = await hitl("show", paused["approval_id"], "--json", env=env)
    assert code == 0 and still["status"] == "pending"  # reading stays local; deciding does not
    assert str(ErrorCode.INVALID_INPUT) in err


def test_the_api_client_takes_only_an_http_url_with_its_token() -> None:
    assert remote_from_env({}) is None
    with pytest.raises(EngineError, match="go together: set HITL_TOKEN too"):
        remote_from_env({"HITL_API_URL": "http://127.0.0.1:3000"})
    with pytest.raises(EngineError, match="must be an http:// or https:// URL") as err:
        remote_from_env({"HITL_API_URL": "file:///etc/passwd", "HITL_TOKEN": "t"})
    assert err.value.code is ErrorCode.INVALID_INPUT
    client = remote_from_env({"HITL_API_URL": "https://hitl.example.org/", "HITL_TOKEN": "t"})
    assert client is not None and client.url == "https://hitl.example.org"
