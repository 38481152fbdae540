"""`hitl serve` reads hitl.yaml again on SIGHUP: a reviewer removed from a role (in the file, or from a Slack user
group) is refused at their next decision on every surface (the web page, even one drawn before the change, a signed
Slack click, the API), and nothing is recorded; a file that does not load changes nothing, logs one ERROR and is
audited; policy changes are said to need a restart; a web session whose subject no longer maps ends."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import aiohttp

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.models import Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.storage import open_store
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.webapi import Message
from tests.bot.conftest import SECRET
from tests.waiting import eventually
from tests.web.conftest import TEAM, Inbox, browser, cli_run, serving, sign_in, to_callback
from tests.web.test_decision_page import card_of, paused_refund, stored
from tests.web.test_page_decisions import form_of, page_of, post

SUPPORT = "support: [U_SUPPORT1, U_SUPPORT2]"


async def audit(inbox: Inbox) -> list[AuditEntry]:
    store = open_store(inbox.env["HITL_STORE"])
    try:
        return await store.audit.entries()
    finally:
        await store.close()


async def reload(inbox: Inbox, done: int) -> AuditEntry:
    """SIGHUP to `hitl serve`, then its ``done``-th reload's audit entry (counted from 1)."""
    assert inbox.proc is not None
    inbox.proc.send_signal(signal.SIGHUP)

    async def reloaded() -> AuditEntry | None:
        entries = [e for e in await audit(inbox) if e.event == "config.reloaded"]
        return entries[done - 1] if len(entries) >= done else None

    return await eventually(reloaded, what=f"reload {done} in the audit trail")


async def refused(inbox: Inbox, approval_id: str, who: str) -> AuditEntry:
    """The audited refusal of ``who``'s decision on ``approval_id``."""

    async def found() -> AuditEntry | None:
        return next(
            (e for e in await audit(inbox) if e.event == "refused" and (e.approval_id, e.actor) == (approval_id, who)),
            None,
        )

    return await eventually(found, what=f"the refusal of {who} on {approval_id}")


async def untouched(inbox: Inbox, approval_id: str) -> None:
    done = await stored(inbox, approval_id)
    assert done.status is Status.PENDING and not done.decisions and done.version == 1


async def posted(inbox: Inbox, approval_id: str) -> Message:
    """The approval's card, once `hitl serve` posted it."""
    return await eventually(lambda: card_of(inbox, approval_id), what=f"the card of {approval_id}")


async def new_token(inbox: Inbox, name: str, who: str, *scopes: str) -> tuple[str, list[str]]:
    """`hitl token new` for ``who`` with ``scopes``: the token, and its entry's lines for api.tokens."""
    made = await cli_run(
        inbox,
        *["token", "new", "--name", name, "--as", who],
        *[arg for scope in scopes for arg in ("--scope", scope)],
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    return lines[1], lines[lines.index("add under api.tokens in hitl.yaml:") + 1 :]


def add_tokens(inbox: Inbox, *entries: list[str]) -> None:
    """Add ``entries`` under api.tokens of the served hitl.yaml (which has no api: yet; the API reads it live)."""
    config = inbox.cwd / "hitl.yaml"
    lines = [line for entry in entries for line in entry]
    config.write_text(config.read_text() + "api:\n  tokens:\n" + "\n".join(lines) + "\n")


async def read_decide_token(inbox: Inbox, who: str) -> str:
    """`hitl token new` for ``who`` (read and decide), its entry added under api.tokens."""
    token, entry = await new_token(inbox, "t1", who, "read", "decide")
    add_tokens(inbox, entry)
    return token


def errors_in_log(cwd: Path) -> list[str]:
    """The messages `hitl serve` logged at ERROR (its log lines are JSON)."""
    lines = [json.loads(line) for line in (cwd / "serve.log").read_text().splitlines() if line.startswith("{")]
    return [str(line["message"]) for line in lines if line.get("level") == "ERROR"]


async def test_a_reviewer_removed_from_a_role_is_refused_on_every_surface(tmp_path: Path) -> None:
    async with serving(tmp_path) as inbox, browser() as web, aiohttp.ClientSession() as http:
        on_page, on_card, by_api = [await paused_refund(inbox, amount) for amount in (40, 50, 60)]
        token = await read_decide_token(inbox, "U_SUPPORT1")
        await sign_in(web, inbox, "U_SUPPORT1")
        drawn = form_of(await page_of(web, inbox, on_page), "approve")  # the page drawn before the change
        card = await posted(inbox, on_card)
        api = f"{inbox.url}/api/v1/approvals/{by_api}"
        async with http.get(api, headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 200
            seen = await r.json()
        assert seen["can_decide"] is True
        config = tmp_path / "hitl.yaml"
        before = config.read_text()

        config.write_text(before.replace(SUPPORT, "support: [U_SUPPORT1, U_SUPPORT2"))  # not YAML
        failed = await reload(inbox, 1)
        assert failed.outcome == "policy_invalid" and failed.detail.startswith("not reloaded, nothing changed: ")
        said = errors_in_log(tmp_path)
        assert len(said) == 1 and said[0].startswith("hitl.yaml was not reloaded and nothing changed: ")
        assert "not valid YAML" in said[0] and said[0].endswith("fix it, then send SIGHUP again")

        changed = before.replace(SUPPORT, "support: [U_SUPPORT2]").replace("timeout: 4h", "timeout: 2h")
        config.write_text(changed)
        done = await reload(inbox, 2)
        assert done.outcome == "ok"
        assert done.detail == (
            "roles: support: -U_SUPPORT1; policy changes need a restart: policy changed and still apply as at start"
        )

        status, page = await post(web, inbox, on_page, drawn)
        assert status == 403 and "role" in page
        await refused(inbox, on_page, "U_SUPPORT1")
        slack = Dispatcher(inbox.state, http, bot_url=f"{inbox.url}/slack/events", signing_secret=SECRET)
        assert (await slack.click("U_SUPPORT1", card, ACTION_APPROVE)).status == 200
        await refused(inbox, on_card, "U_SUPPORT1")
        decision = {"decision": "approve", "expected_version": seen["version"], "action_hash": seen["action_hash"]}
        async with http.post(f"{api}/decisions", json=decision, headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 403, await r.text()
        for approval_id in (on_page, on_card, by_api):
            await untouched(inbox, approval_id)
        assert "You may not decide this one." in await page_of(web, inbox, on_page)


async def test_a_member_removed_from_a_slack_user_group_is_refused_once_the_group_is_read_again(
    tmp_path: Path,
) -> None:
    with_group = "support: [U_SUPPORT1, U_SUPPORT2, S0HELPERS]"
    async with serving(tmp_path, edit=lambda text: text.replace(SUPPORT, with_group)) as inbox:
        inbox.state.usergroups["S0HELPERS"] = ["U_STRANGER"]
        first, second = [await paused_refund(inbox, amount) for amount in (40, 50)]
        cards = [await posted(inbox, a) for a in (first, second)]
        async with aiohttp.ClientSession() as http:
            slack = Dispatcher(inbox.state, http, bot_url=f"{inbox.url}/slack/events", signing_secret=SECRET)
            assert (await slack.click("U_STRANGER", cards[0], ACTION_APPROVE)).status == 200

            async def approved() -> bool:
                return [d.reviewer for d in (await stored(inbox, first)).decisions] == ["U_STRANGER"]

            await eventually(approved, what="the group member's approval")
            inbox.state.usergroups["S0HELPERS"] = []  # removed from the group in Slack
            assert (await reload(inbox, 1)).detail == "roles unchanged"
            assert (await slack.click("U_STRANGER", cards[1], ACTION_APPROVE)).status == 200
            await refused(inbox, second, "U_STRANGER")
        await untouched(inbox, second)


async def test_a_subject_unmapped_by_a_reload_is_signed_out_and_cannot_sign_in_again(tmp_path: Path) -> None:
    mapped = '  subjects: {"okta-ann": U_SUPPORT1, "okta-bob": U_SUPPORT2}\n'

    def other_provider(text: str) -> str:  # not Slack's sign-in: subjects map people
        assert f"    slack_team_id: {TEAM}\n" in text
        return text.replace(f"    slack_team_id: {TEAM}\n", "") + mapped

    async with serving(tmp_path, edit=other_provider) as inbox, browser() as ann, browser() as bob:
        await sign_in(ann, inbox, "okta-ann")
        await sign_in(bob, inbox, "okta-bob")
        for http, who in ((ann, "U_SUPPORT1"), (bob, "U_SUPPORT2")):
            async with http.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
                assert r.status == 200 and f"Signed in as <b>{who}</b>" in await r.text()
        config = tmp_path / "hitl.yaml"
        config.write_text(config.read_text().replace(mapped, '  subjects: {"okta-bob": U_SUPPORT2}\n'))
        done = await reload(inbox, 1)
        assert done.detail == "roles unchanged; web sign-in mappings changed (1 session(s) ended)"
        async with ann.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 303  # signed out: to sign in again
        async with bob.get(f"{inbox.url}/inbox", allow_redirects=False) as r:
            assert r.status == 200  # still mapped: still signed in
        callback = await to_callback(ann, inbox, "okta-ann")
        async with ann.get(callback, allow_redirects=False) as r:
            assert r.status == 403 and "Not a reviewer here" in await r.text()
