"""Failover end to end through a real `hitl serve`: the Slack stand-in answers every call ``token_revoked`` (an admin
removed the app), the refund's ``failover: {to: email}`` sends both support reviewers a message through a real SMTP
server (aiosmtpd), one of them follows its link, signs in at the real OpenID Connect provider and approves on the
page, and the run resumes once; the audit says why the mail went."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from hitl.engine.domain.models import Status
from hitl.engine.storage import open_store
from hitl.sandbox.webapi import SlackState
from tests.mail.smtp_server import smtp_server
from tests.waiting import eventually
from tests.web.conftest import browser, executed_with_trail, refunds, serving, sign_in
from tests.web.test_decision_page import paused_refund
from tests.web.test_role_reload import read_decide_token

TOOL = "      timeout: 4h\n"


def failing_over(port: int, failover: str = "{to: email}") -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert TOOL in text
        return text.replace(TOOL, TOOL + f"      failover: {failover}\n", 1) + (
            f"email: {{smtp_url: 'smtp://127.0.0.1:{port}', from: hitl@example.com, pace: 0}}\n"
            "contacts: {U_SUPPORT1: {email: s1@example.com}, U_SUPPORT2: {email: s2@example.com}}\n"
        )

    return edit


async def test_a_revoked_slack_token_fails_over_to_email_and_the_page_decides(tmp_path: Path) -> None:
    with smtp_server() as box:
        async with serving(tmp_path, edit=failing_over(box.port)) as inbox:
            inbox.state.revoked = True
            approval_id = await paused_refund(inbox, 75)
            await eventually(lambda: len(box.received) >= 2, what="the failover mail to both support reviewers")
            assert sorted(r.recipients for r in box.received) == [("s1@example.com",), ("s2@example.com",)]
            assert not [m for m in inbox.state.messages if approval_id in m.text]  # Slack took no card
            [link] = re.findall(r"https?://[^\s<>\"]+", box.to("s2@example.com")[0].part("plain"))
            assert link == f"{inbox.url}/inbox/approvals/{approval_id}"

            async with browser() as http:
                assert await sign_in(http, inbox, "U_SUPPORT2", path=link.removeprefix(inbox.url)) == (
                    link.removeprefix(inbox.url)
                )
                async with http.get(link) as r:
                    page = await r.text()
                form = re.search(r'<form method="post" action="([^"]+)" class="decide approve">(.*?)</form>', page)
                assert form is not None
                fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form[2]))
                async with http.post(f"{inbox.url}{form[1]}", data=fields) as r:
                    assert r.status == 200 and "U_SUPPORT2 approved" in await r.text()

            assert await eventually(lambda: refunds(inbox), what="the run to resume and refund") == [(75.0,)]
            approval, trail = await executed_with_trail(inbox, approval_id)
            said = [e.detail for e in trail]
            assert approval.status is Status.EXECUTED and [(d.reviewer, d.via) for d in approval.decisions] == [
                ("U_SUPPORT2", "web")
            ]
            assert "to U_SUPPORT1 (failover: Slack refused the card: token_revoked)" in said
            assert refunds(inbox) == [(75.0,)]  # once


async def test_an_alert_slack_cannot_take_goes_by_email_to_its_role(tmp_path: Path) -> None:
    alert = (
        "alerts:\n  rules:\n    - {name: stuck, figure: oldest_pending, above: 0, min_count: 1, "
        "reason: an approval waits}\n"
    )

    def edit(text: str) -> str:
        return text.replace("email: {", "email: {alert_role: support, ") + alert

    with smtp_server() as box:
        async with serving(tmp_path, edit=lambda text: edit(failing_over(box.port)(text))) as inbox:
            inbox.state.revoked = True
            await paused_refund(inbox, 75)

            def alerts() -> list[str]:
                return sorted(r.recipients[0] for r in box.received if "stuck" in str(r.message["Subject"]))

            assert await eventually(lambda: len(alerts()) == 2 and alerts(), what="the alert by e-mail") == [
                "s1@example.com",
                "s2@example.com",
            ]
            got = next(r for r in box.received if "stuck" in str(r.message["Subject"]))
            assert "an approval waits" in got.part("plain") and "Slack could not take this message" in got.part("plain")


def archive(state: SlackState) -> None:
    channel = state.channel("#refund-approvals")
    assert channel is not None
    state.archived.add(channel.id)


def down(status: int) -> Callable[[SlackState], None]:
    def apply(state: SlackState) -> None:
        state.outage = status

    return apply


@pytest.mark.parametrize(
    ("breaks", "said"),
    [
        (archive, "failover: Slack refused the card: is_archived"),
        (down(503), "failover: "),  # refused with Slack's error, or no card within the bound: either way, mailed
        (down(429), "failover: no card posted within 1 s"),  # every post held under 429s
    ],
    ids=["is_archived", "5xx_forever", "429_forever"],
)
async def test_slack_refusing_or_away_fails_over_to_email(
    tmp_path: Path, breaks: Callable[[SlackState], None], said: str
) -> None:
    with smtp_server() as box:
        async with serving(tmp_path, edit=failing_over(box.port, "{to: email, card_within: 1s}")) as inbox:
            breaks(inbox.state)
            approval_id = await paused_refund(inbox, 75)
            await eventually(lambda: len(box.received) >= 2, what="the failover mail to both support reviewers")
            assert sorted(r.recipients for r in box.received) == [("s1@example.com",), ("s2@example.com",)]
            assert all(r.message["X-Hitl-Approval"] == approval_id for r in box.received)
            store = open_store(inbox.env["HITL_STORE"])
            try:
                queued = [
                    e.detail for e in await store.audit.entries(approval_id=approval_id) if e.event == "mail_queued"
                ]
            finally:
                await store.close()
            assert len(queued) == 2 and all(q.split(" (", 1)[1].startswith(said) for q in queued), queued


async def test_slack_unreachable_fails_over_and_the_card_state_is_recorded(tmp_path: Path) -> None:
    with smtp_server() as box:
        async with serving(tmp_path, edit=failing_over(box.port, "{to: email, card_within: 1s}")) as inbox:
            assert inbox.emulator is not None
            await inbox.emulator.close()  # Slack's port closed: no answer at all, not even an error
            approval_id = await paused_refund(inbox, 75)
            await eventually(lambda: len(box.received) >= 2, what="the failover mail to both support reviewers")
            assert sorted(r.recipients for r in box.received) == [("s1@example.com",), ("s2@example.com",)]
            store = open_store(inbox.env["HITL_STORE"])
            try:

                async def refused() -> list[tuple[str, str, str]] | None:
                    trail = await store.audit.entries(approval_id=approval_id)
                    cards = [(e.event, e.outcome, e.detail) for e in trail if e.event.startswith("card_")]
                    return cards if any(c[0] == "card_refused" for c in cards) else None

                cards = await eventually(refused, what="the card's refusal in the audit trail")
                queued = [
                    e.detail for e in await store.audit.entries(approval_id=approval_id) if e.event == "mail_queued"
                ]
            finally:
                await store.close()
            assert cards == [
                ("card_queued", "ok", "in #refund-approvals"),  # before Slack was asked
                ("card_refused", "unreachable", "in #refund-approvals"),
            ]
            assert all("(failover: no card posted within 1 s)" in q for q in queued), queued
            async with aiohttp.ClientSession() as http, http.get(f"{inbox.url}/metrics") as r:
                assert 'hitl_cards_total{outcome="unreachable"}' in await r.text()


async def test_a_refused_card_is_in_the_trail_with_slacks_code(tmp_path: Path) -> None:
    with smtp_server() as box:
        async with serving(tmp_path, edit=failing_over(box.port)) as inbox:
            archive(inbox.state)
            approval_id = await paused_refund(inbox, 75)
            await eventually(lambda: len(box.received) >= 2, what="the failover mail to both support reviewers")
            shown = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "hitl", "show", approval_id],
                env={**inbox.env, "HITL_CONFIG": "", "COLUMNS": "200"},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert shown.returncode == 0, shown.stderr
            lines = [line.split("delivery", 1)[1].strip() for line in shown.stdout.splitlines() if "delivery" in line]
            assert lines[:2] == [
                "Slack card queued in #refund-approvals",
                "Slack card refused in #refund-approvals [is_archived]",
            ], lines
            async with aiohttp.ClientSession() as http, http.get(f"{inbox.url}/metrics") as r:
                assert 'hitl_cards_total{outcome="is_archived"}' in await r.text()


async def test_a_card_is_recorded_queued_once_though_every_sweep_queues_it_again(tmp_path: Path) -> None:
    with smtp_server() as box:
        async with serving(tmp_path, edit=failing_over(box.port)) as inbox:
            archive(inbox.state)  # every post refused: every sweep queues the card again
            approval_id = await paused_refund(inbox, 75)

            async def refusals() -> float:
                async with aiohttp.ClientSession() as http, http.get(f"{inbox.url}/metrics") as r:
                    said = re.search(r'^hitl_cards_total\{outcome="is_archived"\} (\S+)$', await r.text(), re.M)
                return float(said[1]) if said else 0.0

            await eventually(lambda: _at_least(refusals, 3), what="the card queued and refused by three sweeps")
            store = open_store(inbox.env["HITL_STORE"])
            try:
                trail = [(e.event, e.outcome, e.detail) for e in await store.audit.entries(approval_id=approval_id)]
            finally:
                await store.close()
            assert [t for t in trail if t[0] == "card_queued"] == [("card_queued", "ok", "in #refund-approvals")]
            assert trail.index(("card_queued", "ok", "in #refund-approvals")) < [t[0] for t in trail].index(
                "card_refused"
            )
            async with aiohttp.ClientSession() as http, http.get(f"{inbox.url}/metrics") as r:
                assert 'hitl_cards_total{outcome="queued"} 1.0' in await r.text()
            token = await read_decide_token(inbox, "U_SUPPORT1")
            async with aiohttp.ClientSession() as http:
                api = f"{inbox.url}/api/v1/approvals/{approval_id}"
                async with http.get(api, headers={"Authorization": f"Bearer {token}"}) as r:
                    assert r.status == 200, await r.text()
                    seen = await r.json()
            said = [(e["event"], e["detail"]) for e in seen["audit"] if e["event"] == "card_queued"]
            assert said == [("card_queued", "in #refund-approvals")]


async def _at_least(figure: Callable[[], Awaitable[float]], floor: float) -> bool:
    return await figure() >= floor
