"""Delegation with a chain of custody, over signed Slack requests and the HTTP API, on every store: a finance reviewer
away hands their role to a colleague (`/hitl delegate @person until <date>`, the date read in their Slack time zone
and echoed in UTC); the colleague's vote is theirs too (one vote toward a quorum, one person for separation of
duties); both Home tabs say so; the audit records it given, used and ended; after `/hitl delegate end` the colleague
decides nothing of finance's."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.bot.views.home import HOME_DELEGATION
from hitl.engine.domain.delegation import utc_text
from hitl.engine.domain.models import Approval, Status
from tests.api.cli_process import hitl
from tests.bot import payments
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay, token

FIN2, SUPPORT2, FIN1_PROPOSER, PAYBOT = "tok-fin2", "tok-support2", "tok-fin1-agent", "tok-paybot"
CONFIG = (
    payments.requested_by_riley(support="[U_SUPPORT1, U_SUPPORT2]", finance="[U_FIN1, U_FIN2]")
    + payments.tool("pay", tier="approve", role="finance", quorum=2, timeout="1h")
    + payments.api_tokens(
        token("fin2", FIN2, "U_FIN2"),
        token("support2", SUPPORT2, "U_SUPPORT2"),
        token("fin1-agent", FIN1_PROPOSER, "U_FIN1", "[propose, read]"),
        token("paybot", PAYBOT, "U_PAYBOT", "[propose, read]"),
    )
)
LA = ZoneInfo("America/Los_Angeles")

h = harness_serving(CONFIG)


def _in_five_days(h: Harness) -> tuple[str, float]:
    """A date five days ahead in Los Angeles, and the instant that day ends (what the delegation lasts until)."""
    day = datetime.fromtimestamp(h.clock.now() + 5 * 86400, tz=LA).date()
    return day.isoformat(), datetime(day.year, day.month, day.day, tzinfo=LA).timestamp() + 86400


async def _say(h: Harness, user: str, text: str) -> str:
    assert (await h.slack.command(user, "general", text)).status == 200
    await h.settle()
    return h.ephemeral(user)[-1].text


def _delegation_lines(h: Harness, user: str) -> list[str]:
    blocks = h.state.homes.get(user, {}).get("blocks", [])
    return [b["text"]["text"] for b in blocks if str(b.get("block_id", "")).startswith(HOME_DELEGATION)]


async def _events(h: Harness, a: Approval | None = None) -> list[tuple[str, str, str]]:
    found = await h.svc.store.audit.entries(approval_id=a.id if a else None)
    return [(e.event, e.actor, e.detail) for e in found]


async def test_a_delegate_decides_as_one_person_with_the_delegator_until_it_ends(h: Harness) -> None:
    h.state.users["U_FIN1"]["tz"] = "America/Los_Angeles"
    date, until = _in_five_days(h)
    said = await _say(h, "U_FIN1", f"delegate @u_support1 until {date}")
    assert f"until *{utc_text(until)}*" in said and "America/Los_Angeles" in said, said
    assert utc_text(until).endswith("08:00 UTC")  # midnight in Los Angeles, in UTC (winter)
    given = [e for e in await _events(h) if e[0] == "delegated"]
    assert len(given) == 1 and given[0][1] == "U_FIN1" and "to U_SUPPORT1" in given[0][2] and "via slack" in given[0][2]
    await h.rt.ctx.home.settled()
    assert "You delegated your reviewer roles to <@U_SUPPORT1>" in _delegation_lines(h, "U_FIN1")[0]
    assert "You act for <@U_FIN1>" in _delegation_lines(h, "U_SUPPORT1")[0]

    # The delegate's vote counts as the delegator's too: neither of them can add the second one.
    a = await pay(h, 120, "V-1")
    assert (await h.slack.click("U_SUPPORT1", h.card_for(a.id), ACTION_APPROVE)).status == 200
    await h.settle()
    voted = await h.svc.store.approvals.get(a.id)
    assert voted.status is Status.PENDING and [(d.reviewer, d.acting_for) for d in voted.decisions] == [
        ("U_SUPPORT1", "U_FIN1")
    ]
    assert "<@U_SUPPORT1> (acting for <@U_FIN1>) approved" in json.dumps(h.card_for(a.id).blocks, ensure_ascii=False)
    assert (await h.slack.click("U_FIN1", h.card_for(a.id), ACTION_APPROVE)).status == 200
    await h.settle()
    assert len((await h.svc.store.approvals.get(a.id)).decisions) == 1
    assert "one vote" in h.ephemeral("U_FIN1")[-1].text
    assert (await h.slack.click("U_FIN2", h.card_for(a.id), ACTION_APPROVE)).status == 200
    await h.settle()
    done = await h.svc.store.approvals.get(a.id)
    assert done.status is Status.APPROVED and [d.acting_for for d in done.decisions] == ["U_FIN1", None]
    decided = [d for e, _, d in await _events(h, a) if e == "decided"]
    assert "acting for U_FIN1 (delegation)" in decided[0] and "acting for" not in decided[1]
    refused = [(actor, d) for e, actor, d in await _events(h, a) if e == "refused"]
    assert [actor for actor, _ in refused] == ["U_FIN1"]
    await h.rt.ctx.metrics.hitl.refresh()
    async with h.http.get(f"{h.bot_url}/metrics") as r:
        assert 'hitl_actions{outcome="under_delegation",tier="approve",tool="pay"} 1.0' in await r.text()

    # Ended: from now on the colleague decides nothing of finance's, on every surface.
    said = await _say(h, "U_FIN1", "delegate end")
    assert "has ended" in said
    ended = [e for e in await _events(h) if e[0] == "delegation_ended"]
    assert len(ended) == 1 and ended[0][1] == "U_FIN1" and "was ended by U_FIN1" in ended[0][2]
    await h.rt.ctx.home.settled()
    assert _delegation_lines(h, "U_FIN1") == [] and _delegation_lines(h, "U_SUPPORT1") == []
    b = await pay(h, 80, "V-2")
    assert (await h.slack.click("U_SUPPORT1", h.card_for(b.id), ACTION_APPROVE)).status == 200
    await h.settle()
    assert (await h.svc.store.approvals.get(b.id)).decisions == ()
    assert "<@U_FIN1>" not in await _say(h, "U_SUPPORT1", "delegations")


async def test_neither_decides_the_others_request(h: Harness) -> None:
    date, _ = _in_five_days(h)
    await _say(h, "U_FIN1", f"delegate @u_support1 until {date}")
    headers = {"Authorization": f"Bearer {FIN1_PROPOSER}"}  # U_FIN1's own agent asks for a payment
    body = {"tool": "pay", "args": {"to": "V-9", "amount": 50}, "session": "ses_fin1", "idempotency_key": "k1"}
    async with h.http.post(f"{h.bot_url}/api/v1/proposals", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        aid = (await r.json())["approval"]["id"]
    await h.settle()
    assert "Nothing is waiting for you" in await _say(h, "U_SUPPORT1", "pending")  # not theirs to decide
    assert (await h.slack.click("U_SUPPORT1", h.card_for(aid), ACTION_APPROVE)).status == 200
    await h.settle()
    assert (await h.svc.store.approvals.get(aid)).decisions == ()
    assert "neither of you decides it (separation of duties)" in h.ephemeral("U_SUPPORT1")[-1].text
    assert [d for e, _, d in await _events(h) if e == "refused"] != []


async def test_what_cannot_be_delegated_is_refused_and_changes_nothing(h: Harness) -> None:
    date, _ = _in_five_days(h)
    h.state.users["U_BOT"] = {"name": "somebot", "real_name": "Some Bot", "tz": "UTC", "is_bot": True}
    far = datetime.fromtimestamp(h.clock.now() + 31 * 86400, tz=LA).date().isoformat()
    cases = {
        f"delegate @u_support1 until {far}": "at most 30 days",
        "delegate @u_support1 until someday": "YYYY-MM-DD",
        f"delegate @u_fin1 until {date}": "yourself",
        f"delegate @somebot until {date}": "nor an active person of the Slack workspace",
        f"delegate <@U_NOBODY|ghost> until {date}": "nor an active person of the Slack workspace",
        f"delegate @u_support1 until {date} support": "does not hold the role 'support'",
        "delegate @u_support1": "/hitl delegate @person until",
    }
    for text, expected in cases.items():
        assert expected in await _say(h, "U_FIN1", text), text
    assert "holds no reviewer role" in await _say(h, "U_STRANGER", f"delegate @u_support1 until {date}")
    assert await h.svc.store.delegations.active(now=h.clock.now()) == []

    # Never re-delegated: what U_SUPPORT1 was handed is not theirs to hand on.
    await _say(h, "U_FIN1", f"delegate @u_support1 until {date} finance")
    said = await _say(h, "U_SUPPORT1", f"delegate @u_support2 until {date} finance")
    assert "does not hold the role 'finance'" in said
    assert "already delegates to U_SUPPORT1" in await _say(h, "U_FIN1", f"delegate @u_fin2 until {date}")
    assert [d.delegate for d in await h.svc.store.delegations.active(now=h.clock.now())] == ["U_SUPPORT1"]


async def test_the_api_gives_lists_and_ends_a_delegation_as_the_tokens_reviewer(h: Harness) -> None:
    date, until = _in_five_days(h)
    fin2, support2 = {"Authorization": f"Bearer {FIN2}"}, {"Authorization": f"Bearer {SUPPORT2}"}
    url = f"{h.bot_url}/api/v1/delegations"
    body = {"delegate": "U_SUPPORT2", "until": date, "tz": "America/Los_Angeles"}
    async with h.http.post(url, json={**body, "until": "2099-01-01"}, headers=fin2) as r:
        assert r.status == 422 and "at most 30 days" in (await r.json())["error"]["message"]
    async with h.http.post(url, json={**body, "tz": "Mars/Base"}, headers=fin2) as r:
        assert r.status == 422
    async with h.http.post(url, json=body, headers=fin2) as r:
        assert r.status == 201, await r.text()
        given = await r.json()
    assert (given["delegator"], given["delegate"], given["role"], given["via"]) == ("U_FIN2", "U_SUPPORT2", None, "api")
    assert given["until"].startswith(datetime.fromtimestamp(until, tz=ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M"))
    for headers in (fin2, support2):
        async with h.http.get(url, headers=headers) as r:
            assert [d["id"] for d in (await r.json())["delegations"]] == [given["id"]]

    # The delegate decides through the API with the delegated role, and the decision says for whom.
    a = await pay(h, 300, "V-3")
    decide = {"decision": "approve", "expected_version": a.version, "action_hash": a.action_hash}
    async with h.http.post(f"{h.bot_url}/api/v1/approvals/{a.id}/decisions", json=decide, headers=support2) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["decisions"][0]["acting_for"] == "U_FIN2"

    async with h.http.post(f"{url}/end", json={}, headers=fin2) as r:
        assert r.status == 200 and (await r.json())["ended_by"] == "U_FIN2"
    async with h.http.post(f"{url}/end", json={}, headers=fin2) as r:
        assert r.status == 404
    async with h.http.get(url, headers=fin2) as r:
        assert (await r.json())["delegations"] == []


async def test_one_rule_refuses_a_delegate_with_the_same_code_and_words_on_every_surface(h: Harness) -> None:
    date, _ = _in_five_days(h)
    h.state.users["U_BOT"] = {"name": "somebot", "real_name": "Some Bot", "tz": "UTC", "is_bot": True}
    h.state.users["U_GONE"] = {"name": "gone", "real_name": "Gone", "tz": "UTC", "deleted": True}
    # A person to Slack, but the identity an agent's token proposes as (it may not decide): never a delegate.
    h.state.users["U_PAYBOT"] = {"name": "paybot", "real_name": "Pay Bot", "tz": "UTC"}
    url, fin2 = f"{h.bot_url}/api/v1/delegations", {"Authorization": f"Bearer {FIN2}"}
    cli = {"HITL_API_URL": h.bot_url, "HITL_TOKEN": FIN2}
    for delegate in ("U_NOBODY", "U_BOT", "U_GONE", "U_PAYBOT"):
        async with h.http.post(url, json={"delegate": delegate, "until": date}, headers=fin2) as r:
            assert r.status == 422, await r.text()
            error = (await r.json())["error"]
        assert error["code"] == "invalid_delegate", error
        said = await _say(h, "U_FIN2", f"delegate <@{delegate}> until {date}")
        assert said == f":no_entry: {error['message']} `invalid_delegate`", said
        if delegate == "U_NOBODY":  # the CLI, a real process, through the API
            code, _, err = await hitl("delegate", "give", "--to", delegate, "--until", date, env=cli)
            assert code == 1 and error["message"] in err and "[invalid_delegate]" in err, err
    # What only the API lets a caller write: the agent's identity (requester:), an id in mention markup.
    for delegate in ("agent:riley", "<@U_SUPPORT1>", "<@U_SUPPORT1|sup>", "@U_SUPPORT1"):
        async with h.http.post(url, json={"delegate": delegate, "until": date}, headers=fin2) as r:
            assert r.status == 422 and (await r.json())["error"]["code"] == "invalid_delegate", delegate
    assert await h.svc.store.delegations.active(now=h.clock.now()) == []
    assert [e for e in await _events(h) if e[0] == "delegated"] == []

    # An active person of the workspace whom hitl.yaml does not list may act for a reviewer.
    assert ":handshake:" in await _say(h, "U_FIN2", f"delegate @u_stranger until {date}")
    assert [d.delegate for d in await h.svc.store.delegations.active(now=h.clock.now())] == ["U_STRANGER"]


async def test_an_end_no_date_holds_is_refused_with_a_code_in_slack_and_the_api(h: Harness) -> None:
    url, fin2 = f"{h.bot_url}/api/v1/delegations", {"Authorization": f"Bearer {FIN2}"}
    cases = [
        ("9999-12-31", "UTC"),  # its end is the midnight after the last day a date holds
        ("10000-01-01", "UTC"),
        ("9999-12-31 23:59", "America/Los_Angeles"),  # in UTC, year 10000
        ("9999-12-31T23:59:59-12:00", "UTC"),
        ("0001-01-01 00:00", "Asia/Tokyo"),  # in UTC, year 0
    ]
    for until, tz in cases:
        async with h.http.post(url, json={"delegate": "U_SUPPORT2", "until": until, "tz": tz}, headers=fin2) as r:
            assert r.status == 422, (until, await r.text())
            error = (await r.json())["error"]
        assert error["code"] == "invalid_input", error
        h.state.users["U_FIN2"]["tz"] = tz
        said = await _say(h, "U_FIN2", f"delegate @u_support2 until {until}")
        assert said == f":no_entry: {error['message']} `invalid_input`", (until, said)
    assert await h.svc.store.delegations.active(now=h.clock.now()) == []
