"""Failover to e-mail (``failover: {to: email}`` on a tool, a rule or a tier), against a real SMTP server and a real
store: an approval whose card Slack refused is mailed at once, one with no card past ``card_within`` is mailed then,
one nobody decided by ``after`` is mailed then, and one whose card is up and within its time is not; the rule that
set the tier wins over the tool, the tool over the tier; failover with nowhere to go is refused at load."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hitl.engine.config.hitl_yaml import HitlConfig, parse_config
from hitl.engine.domain.alerts import cards_undelivered
from hitl.engine.domain.models import Tier
from hitl.engine.domain.records import MessageRef
from hitl.engine.errors import EngineError
from hitl.engine.runtime.alerts import AlertWatch
from hitl.engine.storage.sqlite import SqliteStore
from hitl.mail.delivery import CARD_CLAIM, MailDelivery, or_by_mail, recipients
from hitl.mail.smtp import SmtpSender
from hitl.testing import FakeClock, make_approval
from tests.mail.smtp_server import Mailbox, smtp_server

POLICY = """\
policy:
  tools:
    refund: {role: support, failover: {to: email, after: 50%, card_within: 2m}}
    delete_customer: {role: support}
  rules:
    - {name: big, tools: [refund], when: "args.amount > 500", tier: escalate, role: support,
       failover: {to: email, card_within: 10m}}
  tiers:
    escalate: {failover: {to: email, after: 0.9}}
"""


def config(port: int) -> HitlConfig:
    return parse_config(
        "roles: {support: [U_SUPPORT1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{port}', from: hitl@example.com, pace: 0}}\n"
        "contacts: {U_SUPPORT1: {email: s1@example.com}}\n" + POLICY
    )


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with smtp_server() as box:
        yield box


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "hitl.db")
    yield s
    await s.close()


def delivery(cfg: HitlConfig, store: SqliteStore, clock: FakeClock) -> MailDelivery:
    assert cfg.email is not None
    return MailDelivery(store, clock, lambda: cfg, SmtpSender(cfg.email, None), consumer="test")


async def queued(store: SqliteStore, approval_id: str) -> list[str]:
    return [e.detail for e in await store.audit.entries(approval_id=approval_id) if e.event == "mail_queued"]


async def test_a_card_slack_refused_fails_over_at_once(store: SqliteStore, clock: FakeClock, mailbox: Mailbox) -> None:
    mail = delivery(config(mailbox.port), store, clock)
    a, _ = await store.approvals.create(make_approval(now=clock.now()))
    await mail.sweep()
    assert mailbox.received == []  # no card yet, but well within card_within: Slack may still take it
    # What the Slack notifier records when chat.postMessage answers {"ok": false, "error": "is_archived"}
    posting = await store.ledger.claim(
        f"{CARD_CLAIM}{a.id}", action_hash=a.action_hash, holder="bot", now=clock.now(), lease=30.0
    )
    await store.ledger.record_outcome(
        f"{CARD_CLAIM}{a.id}",
        holder="bot",
        attempt=posting.attempt,
        ok=False,
        result={"error": "is_archived"},
        now=clock.now(),
    )
    await mail.sweep()
    assert [r.recipients for r in mailbox.received] == [("s1@example.com",)]
    assert await queued(store, a.id) == ["to U_SUPPORT1 (failover: Slack refused the card: is_archived)"]


async def test_no_card_within_the_bound_fails_over(store: SqliteStore, clock: FakeClock, mailbox: Mailbox) -> None:
    mail = delivery(config(mailbox.port), store, clock)
    a, _ = await store.approvals.create(make_approval(now=clock.now()))
    clock.advance(119)
    await mail.sweep()
    assert mailbox.received == []
    clock.advance(2)  # Slack unreachable, answering 5xx or 429 throughout: no card two minutes on
    await mail.sweep()
    assert await queued(store, a.id) == ["to U_SUPPORT1 (failover: no card posted within 120 s)"]
    assert len(mailbox.received) == 1


async def test_a_carded_approval_nobody_decided_fails_over_after_its_share(
    store: SqliteStore, clock: FakeClock, mailbox: Mailbox
) -> None:
    mail = delivery(config(mailbox.port), store, clock)
    a, _ = await store.approvals.create(make_approval(now=clock.now(), ttl=3600))
    other, _ = await store.approvals.create(make_approval(now=clock.now(), tool="delete_customer", key="d"))
    for carded in (a, other):
        await store.messages.set(carded.id, MessageRef(channel="C1", ts="1.0"))
    clock.advance(1799)
    await mail.sweep()
    assert mailbox.received == []  # its card is up, and half its time is not gone
    clock.advance(1)
    await mail.sweep()
    assert await queued(store, a.id) == ["to U_SUPPORT1 (failover: no decision after 50% of its time)"]
    assert await queued(store, other.id) == []  # delete_customer names no failover
    clock.advance(3000)
    await mail.sweep()
    assert len(mailbox.received) == 1  # once


async def test_the_rule_that_set_the_tier_wins_then_the_tool_then_the_tier(mailbox: Mailbox) -> None:
    cfg = config(mailbox.port)
    big = make_approval(now=0.0, tier=Tier.ESCALATE).model_copy(update={"rule": "big"})
    other = make_approval(now=0.0, tool="delete_customer", tier=Tier.ESCALATE)
    assert (f := cfg.failover_for(big)) is not None and f.card_within == 600 and f.after is None
    assert (f := cfg.failover_for(make_approval(now=0.0))) is not None and f.after == "50%"
    assert (f := cfg.failover_for(other)) is not None and f.after == 0.9
    assert cfg.failover_for(make_approval(now=0.0, tool="delete_customer")) is None


def test_failover_with_nowhere_to_go_is_refused() -> None:
    with pytest.raises(EngineError) as caught:
        parse_config("roles: {support: [U_SUPPORT1]}\n" + POLICY, source="hitl.yaml")
    said = caught.value.message
    assert "policy.rules.big, policy.tiers.escalate, policy.tools.refund fail over to email" in said
    assert "add email:" in said


async def test_a_failover_after_the_hand_on_reaches_the_backup_role_too(mailbox: Mailbox) -> None:
    cfg = parse_config(
        "roles: {support: [U_SUPPORT1], finance: [U_FIN1, U_FIN2]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{mailbox.port}', from: hitl@example.com}}\n"
        "contacts: {U_SUPPORT1: {email: s1@example.com}, U_FIN1: {email: f1@example.com}}\n"
    )
    a = make_approval(now=0.0, ttl=100).model_copy(update={"backup_role": "finance", "hand_on_at": 50.0})
    assert recipients(cfg, a, now=49.0) == ["U_SUPPORT1"]
    assert recipients(cfg, a, now=50.0) == ["U_FIN1", "U_SUPPORT1"]  # U_FIN2 has no address


async def test_cards_undelivered_past_the_bound_fire_the_built_in_alert_once(
    store: SqliteStore, clock: FakeClock, mailbox: Mailbox
) -> None:
    cfg = parse_config(
        "roles: {support: [U_SUPPORT1], ops: [U_OPS1]}\n"
        "web: {public_url: 'https://hitl.example.com', oidc: {issuer: 'https://id.example.com', client_id: hitl}}\n"
        f"email: {{smtp_url: 'smtp://127.0.0.1:{mailbox.port}', from: hitl@example.com, alert_role: ops, "
        "undelivered_after: 5m}\n"
        "contacts: {U_SUPPORT1: {email: s1@example.com}, U_OPS1: {email: ops1@example.com}}\n"
    )
    assert cfg.email is not None
    posted: list[str] = []

    async def slack_away(text: str) -> None:
        posted.append(text)
        if len(posted) == 1:  # the alerts channel cannot take the first announcement
            raise ConnectionError("Slack did not answer")

    watches = [  # two replicas on one store, each as hitl serve builds it
        AlertWatch(
            store,
            clock,
            cfg.alerts,
            holder=f"replica-{i}",
            post=or_by_mail(slack_away, delivery(cfg, store, clock)),
            builtin=[cards_undelivered(cfg.email.undelivered_after)],
        )
        for i in range(2)
    ]
    carded, _ = await store.approvals.create(make_approval(now=clock.now(), key="c"))
    await store.messages.set(carded.id, MessageRef(channel="C1", ts="1.0"))
    a, _ = await store.approvals.create(make_approval(now=clock.now()))
    clock.advance(299)
    await watches[0].sweep()
    assert mailbox.received == []
    clock.advance(2)
    for _ in range(3):
        for watch in watches:
            await watch.sweep()
    [alert] = mailbox.received  # once, across both replicas, however many sweeps: Slack could not take it
    assert alert.recipients == ("ops1@example.com",)
    assert "Alert fired: cards_undelivered" in str(alert.message["Subject"])
    assert "cards_undelivered 301.00 > 300 (every tool)" in alert.part("plain")
    fired = [e for e in await store.audit.entries() if e.event.startswith("alert_")]
    assert [(e.event, e.detail.split(":")[0]) for e in fired] == [("alert_fired", "cards_undelivered")]
    await store.messages.set(a.id, MessageRef(channel="C1", ts="2.0"))  # Slack is back: the alert resolves
    await watches[1].sweep()
    assert posted[-1].startswith(":white_check_mark: Alert resolved: cards_undelivered") and len(mailbox.received) == 1
    await store.approvals.create(make_approval(now=clock.now(), key="b"))
    clock.advance(301)
    await watches[0].sweep()
    assert posted[-1].startswith(":rotating_light: Alert fired: cards_undelivered")  # a new episode, to Slack now
    assert len(mailbox.received) == 1
