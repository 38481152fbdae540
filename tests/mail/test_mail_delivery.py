"""The e-mail channel's sweeper against a real SMTP server (aiosmtpd) and a real store: one message per approval per
reviewer with an address, queued and sent once whatever the sweeps; a refusal retried with backoff (a 4xx) or final
(a 5xx), each audited with the server's code; nothing mailed for an approval no longer pending; the pace held."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hitl.engine.config.hitl_yaml import HitlConfig, parse_config
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval, Tier
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.errors import PolicyError
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.mail.delivery import BURST, MailDelivery, mail_delivery, recipients
from hitl.mail.smtp import SmtpSender
from hitl.testing import FakeClock, make_approval
from tests.mail.smtp_server import Mailbox, smtp_server


def config(port: int, *, pace: float = 0.0, tools: str = "[refund]") -> HitlConfig:
    return parse_config(
        "roles: {support: [U_SUPPORT1, U_SUPPORT2, U_NOADDR, agent:riley], finance: [U_FIN1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{port}', from: hitl@example.com, tools: {tools}, pace: {pace},"
        " max_attempts: 3}\n"
        "contacts:\n  U_SUPPORT1: {email: s1@example.com}\n  U_SUPPORT2: {email: s2@example.com}\n"
        "  U_FIN1: {email: f1@example.com}\n  agent:riley: {email: riley@example.com}\n"
    )


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with smtp_server() as box:
        yield box


def sender_of(cfg: HitlConfig, store: SqliteStore, clock: FakeClock) -> MailDelivery:
    assert cfg.email is not None
    return MailDelivery(store, clock, lambda: cfg, SmtpSender(cfg.email, None), consumer="test")


async def events(store: SqliteStore, a: Approval) -> list[tuple[str, str, str]]:
    return [(e.event, e.outcome, e.detail) for e in await store.audit.entries(approval_id=a.id) if "mail" in e.event]


async def test_each_reviewer_with_an_address_gets_one_message_once(
    tmp_path: Path, clock: FakeClock, mailbox: Mailbox
) -> None:
    cfg = config(mailbox.port)
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        a, _ = await store.approvals.create(
            make_approval(now=clock.now(), args={"order_id": "1\r\nBcc: x@evil.example"})
        )
        other, _ = await store.approvals.create(make_approval(now=clock.now(), tool="delete_customer", key="d"))
        assert recipients(cfg, a, now=clock.now()) == [
            "U_SUPPORT1",
            "U_SUPPORT2",
        ]  # not the requester, not finance, not U_NOADDR
        mail = sender_of(cfg, store, clock)
        for _ in range(3):
            await mail.sweep()
            await sender_of(cfg, store, clock).sweep()  # a second replica (or a restart) queues nothing again
        assert sorted(r.recipients for r in mailbox.received) == [("s1@example.com",), ("s2@example.com",)]
        for got in mailbox.received:
            assert got.sender == "hitl@example.com" and got.message["Bcc"] is None
            assert got.message["X-Hitl-Approval"] == a.id and f"/inbox/approvals/{a.id}" in got.part("plain")
        assert [e[:2] for e in await events(store, a)] == [("mail_queued", "ok")] * 2 + [("mail_sent", "ok")] * 2
        assert await events(store, other) == []  # delete_customer is not among email.tools
        shown = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "hitl", "show", a.id],
            env={**os.environ, "HITL_STORE": f"sqlite:///{tmp_path / 'hitl.db'}", "HITL_CONFIG": "", "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr
        delivery = [line.split("delivery", 1)[1].strip() for line in shown.stdout.splitlines() if "delivery" in line]
        assert delivery[:2] == ["e-mail queued to U_SUPPORT1", "e-mail queued to U_SUPPORT2"]
        assert [d.split(":")[0] for d in delivery[2:]] == ["e-mail sent to U_SUPPORT1", "e-mail sent to U_SUPPORT2"]
    finally:
        await store.close()


async def test_a_refusal_is_retried_with_backoff_and_a_final_one_is_not(
    tmp_path: Path, clock: FakeClock, mailbox: Mailbox
) -> None:
    cfg = config(mailbox.port, tools="['*']")
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        a, _ = await store.approvals.create(make_approval(now=clock.now(), role="finance", tier=Tier.ESCALATE))
        mailbox.refusals = ["451 4.3.0 greylisted, try again later"]
        mail = sender_of(cfg, store, clock)
        await mail.sweep()
        await mail.sweep()
        assert mailbox.received == []
        clock.advance(61)  # past the first backoff (30 s) and the lease the early sweep held it under
        await mail.sweep()
        assert [r.recipients for r in mailbox.received] == [("f1@example.com",)]
        said = await events(store, a)
        assert said[1][:2] == ("mail_refused", "smtp_451") and "greylisted" in said[1][2] and "attempt 2" in said[1][2]
        assert said[2][:2] == ("mail_sent", "ok")

        b, _ = await store.approvals.create(make_approval(now=clock.now(), role="finance", key="b"))
        mailbox.refusals = ["550 5.1.1 no such mailbox"]
        await mail.sweep()
        clock.advance(3600)
        await mail.sweep()
        await mail.sweep()
        assert len(mailbox.received) == 1  # a 5xx is final: never sent again
        assert [e[:2] for e in await events(store, b)] == [("mail_queued", "ok"), ("mail_refused", "smtp_550")]
        assert "gave up" in (await events(store, b))[1][2]
    finally:
        await store.close()


async def test_an_approval_no_longer_pending_is_not_mailed(tmp_path: Path, clock: FakeClock, mailbox: Mailbox) -> None:
    cfg = config(mailbox.port)
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        a, _ = await store.approvals.create(make_approval(now=clock.now(), ttl=10))
        mail = sender_of(cfg, store, clock)
        await mail.queue()
        clock.advance(11)
        assert [x.id for x in await store.approvals.expire_due(now=clock.now())] == [a.id]
        await mail.send()
        assert mailbox.received == []
        assert [e[0] for e in await events(store, a)] == ["mail_queued", "mail_queued"]
    finally:
        await store.close()


async def test_the_pace_holds_a_burst(tmp_path: Path, clock: FakeClock, mailbox: Mailbox) -> None:
    many = [f"U_R{i}" for i in range(8)]
    cfg = parse_config(
        f"roles: {{support: [{', '.join(many)}]}}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{mailbox.port}', from: h@example.com, tools: ['*'], pace: 2.0}}\n"
        "contacts: {" + ", ".join(f"{r}: {{email: {r.lower()}@example.com}}" for r in many) + "}\n"
    )
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        for i in range(2):
            await store.approvals.create(make_approval(now=clock.now(), key=f"k{i}"))
        mail = sender_of(cfg, store, clock)
        await mail.sweep()
        assert len(mailbox.received) == BURST  # 16 messages queued (2 a person, within the cap), a burst sent
        await mail.sweep()
        assert len(mailbox.received) == BURST  # no time passed: none more
        clock.advance(4)
        await mail.sweep()
        assert len(mailbox.received) == BURST + 2  # one every 2 s
        clock.advance(60)
        await mail.sweep()
        assert len(mailbox.received) == 16
    finally:
        await store.close()


async def test_a_flood_sends_each_person_at_most_five_messages_in_ten_minutes(
    tmp_path: Path, clock: FakeClock, mailbox: Mailbox
) -> None:
    cfg = config(mailbox.port)
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        flood = [(await store.approvals.create(make_approval(now=clock.now(), key=f"f{i}")))[0] for i in range(300)]
        mail = sender_of(cfg, store, clock)
        for _ in range(4):
            await mail.sweep()
        for address in ("s1@example.com", "s2@example.com"):
            got = mailbox.to(address)
            assert len(got) == 3  # 600 messages queued: three digests each (200 claimed a sweep)
            assert all(str(m.message["Subject"]).endswith("approvals wait on you") for m in got)
            assert "https://hitl.example.com/inbox\r\n" in got[0].part("plain") and "and 50 more" in got[0].part(
                "plain"
            )
        sent = [e for a in flood[:3] for e in await store.audit.entries(approval_id=a.id) if e.event == "mail_sent"]
        assert len(sent) == 6 and all("(digest of 100)" in e.detail for e in sent)
        later = []
        for i in range(3):  # one at a time: two more messages fit the cap, the third waits
            later.append((await store.approvals.create(make_approval(now=clock.now(), key=f"l{i}")))[0])
            await mail.sweep()
        assert len(mailbox.to("s1@example.com")) == 5 and len(mailbox.to("s2@example.com")) == 5
        assert [r.message["X-Hitl-Approval"] for r in mailbox.to("s1@example.com")[3:]] == [a.id for a in later[:2]]
        clock.advance(601)  # the window has room again
        await mail.sweep()
        assert mailbox.to("s1@example.com")[-1].message["X-Hitl-Approval"] == later[2].id
        assert len(mailbox.received) == 12
    finally:
        await store.close()


async def test_a_named_smtp_login_that_is_not_set_stops_the_server_from_starting(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = parse_config(
        "roles: {support: [U_SUPPORT1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        "email: {smtp_url: 'smtps://mail.example.com', from: h@example.com, username_env: HITL_T_SMTP_USER, "
        "password_env: HITL_T_SMTP_PASSWORD}\n"
    )
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        monkeypatch.setenv("HITL_T_SMTP_USER", "hitl")
        monkeypatch.delenv("HITL_T_SMTP_PASSWORD", raising=False)
        with pytest.raises(PolicyError) as caught:
            mail_delivery(cfg, store, clock, consumer="test", live=lambda: None)
        assert "HITL_T_SMTP_PASSWORD" in caught.value.message and "export" in caught.value.message
        monkeypatch.setenv("HITL_T_SMTP_PASSWORD", "secret")
        made = mail_delivery(cfg, store, clock, consumer="test", live=lambda: None)
        assert made is not None and made.sender.login == ("hitl", "secret")
    finally:
        await store.close()


async def test_a_halt_and_its_lifting_are_mailed_to_the_alert_role_once(
    tmp_path: Path, clock: FakeClock, mailbox: Mailbox
) -> None:
    cfg = parse_config(
        "roles: {support: [U_SUPPORT1, U_SUPPORT2], ops: [U_OPS1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{mailbox.port}', from: hitl@example.com, alert_role: ops}}\n"
        "contacts: {U_SUPPORT1: {email: s1@example.com}, U_OPS1: {email: ops1@example.com}}\n"
    )
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        replicas = [sender_of(cfg, store, clock), sender_of(cfg, store, clock)]
        replicas[1].consumer = "other"
        for mail in replicas:
            await mail.sweep()  # the baseline: nothing stood, nothing is told
        await store.halts.halt(HaltOrder(scope="refund", by="U_OPS1", reason="refunds misfire", at=clock.now()))
        for mail in replicas:
            await mail.sweep()
            await mail.sweep()
        [told] = mailbox.received
        assert told.recipients == ("ops1@example.com",) and str(told.message["Subject"]) == "[hitl] Halted: refund"
        assert "halted by U_OPS1: refunds misfire" in told.part("plain")
        await store.halts.lift("refund", by="U_OPS1", now=clock.now())
        for mail in replicas:
            await mail.sweep()
        assert [str(r.message["Subject"]) for r in mailbox.received] == [
            "[hitl] Halted: refund",
            "[hitl] Halt lifted: refund",
        ]
    finally:
        await store.close()


async def test_the_cap_is_shared_by_two_replicas_on_one_store(
    tmp_path: Path, clock: FakeClock, mailbox: Mailbox
) -> None:
    cfg = config(mailbox.port)
    stores = [SqliteStore(tmp_path / "hitl.db"), SqliteStore(tmp_path / "hitl.db")]  # two processes' connections
    try:
        replicas = [
            MailDelivery(s, clock, lambda: cfg, SmtpSender(cfg.email, None), consumer=f"replica-{i}", batch=20)
            for i, s in enumerate(stores)
            if cfg.email is not None
        ]
        for i in range(300):
            await stores[i % 2].approvals.create(make_approval(now=clock.now(), key=f"f{i}"))
        for _ in range(20):  # 600 messages queued, 20 claimed a sweep by each: each batch past the cap is held
            for replica in replicas:
                await replica.sweep()
        for address in ("s1@example.com", "s2@example.com"):
            assert len(mailbox.to(address)) == 5  # not five per replica
        clock.advance(601)  # the window slides for both
        await replicas[1].sweep()
        assert len(mailbox.to("s1@example.com")) == 6
    finally:
        for s in stores:
            await s.close()


async def test_mail_goes_to_who_may_decide_a_self_approval_its_person_alone(
    tmp_path: Path, clock: FakeClock, mailbox: Mailbox
) -> None:
    """A ``self`` approval is the one person's to confirm: mailed to them and to no reviewer (who may not decide it,
    and need not read it); a call made for a person on another tier is never mailed to that person."""
    cfg = parse_config(
        "roles: {support: [U_SUPPORT1, U_SUPPORT2], finance: [U_FIN1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{mailbox.port}', from: hitl@example.com, tools: [refund, pay]}}\n"
        "contacts:\n  U_SUPPORT1: {email: s1@example.com}\n  U_SUPPORT2: {email: s2@example.com}\n"
        "  U_FIN1: {email: f1@example.com}\n"
        "policy:\n  tools:\n    refund: {tier: self, role: support}\n    pay: {tier: approve, role: support}\n"
    )
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        svc = ApprovalService.from_config(cfg, store=store, clock=clock)
        own = await svc.propose(ProposeRequest("refund", {"order_id": "1"}, session_id="s", on_behalf_of="U_FIN1"))
        theirs = await svc.propose(ProposeRequest("pay", {"to": "V"}, session_id="s", on_behalf_of="U_SUPPORT1"))
        assert own.approval is not None and own.approval.tier is Tier.SELF and theirs.approval is not None
        assert recipients(cfg, own.approval, now=clock.now()) == ["U_FIN1"]
        assert recipients(cfg, theirs.approval, now=clock.now()) == ["U_SUPPORT2"]
        await sender_of(cfg, store, clock).sweep()
        got = sorted((r.message["X-Hitl-Approval"], r.recipients) for r in mailbox.received)
        assert got == sorted([(own.approval.id, ("f1@example.com",)), (theirs.approval.id, ("s2@example.com",))])
    finally:
        await store.close()
