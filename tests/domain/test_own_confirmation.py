"""Tier ``self`` in the policy (issue 68): set only by hitl.yaml, between notify and approve, raised by rules and by a
workflow step's floor like any tier, and settled before anyone is asked: its person alone, or, with nobody known,
the tool's role as approve (fail closed)."""

from __future__ import annotations

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Tier
from hitl.engine.domain.own_confirmation import NO_PERSON, settled
from hitl.engine.domain.policy import Policy, PolicyContext

CONFIG = """
roles:
  support: [U_SUPPORT1]
policy:
  tools:
    send_as_me: {tier: self, role: support, quorum: 2, trustable: true, hand_on_after: 50%, backup_role: support}
    read_mail: {tier: auto}
  rules:
    - name: rival
      tools: [send_as_me]
      when: "args.to == 'eve'"
      tier: approve
    - name: big_read
      tools: [read_mail]
      when: "args.count > 100"
      tier: self
"""


def _policy() -> Policy:
    return parse_config(CONFIG).build_policy()


def test_self_ranks_between_notify_and_approve_and_a_person_decides_it() -> None:
    order = [Tier.AUTO, Tier.NOTIFY, Tier.SELF, Tier.APPROVE, Tier.ESCALATE]
    assert sorted(Tier, key=lambda t: t.rank) == order
    assert Tier.SELF.needs_human and not Tier.NOTIFY.needs_human


def test_settled_with_a_person_is_theirs_alone_one_vote_no_trust_no_hand_on() -> None:
    verdict = _policy().evaluate("send_as_me", {"to": "bob"}, PolicyContext(now=0.0))
    assert verdict.tier is Tier.SELF
    own = settled(verdict, "U_ALICE")
    assert (own.tier, own.quorum, own.trustable, own.hand_on, own.required_role) == (Tier.SELF, 1, False, None, None)


def test_settled_without_a_person_asks_the_tools_role_as_approve() -> None:
    verdict = _policy().evaluate("send_as_me", {"to": "bob"}, PolicyContext(now=0.0))
    closed = settled(verdict, None, quorum=2)  # the tool's quorum, which its tier below approve did not use
    assert (closed.tier, closed.rule, closed.required_role, closed.quorum) == (Tier.APPROVE, NO_PERSON, "support", 2)
    assert "fail closed" in closed.reasons[-1]
    assert closed.why == (
        "Nobody known asked for this, so a reviewer decides.",
        "send_as_me asks the person the agent acts for to confirm it.",
    )


def test_rules_and_a_steps_floor_raise_self_and_nothing_lowers_a_tool_to_it() -> None:
    policy = _policy()
    raised = policy.evaluate("send_as_me", {"to": "eve"}, PolicyContext(now=0.0))
    assert (raised.tier, raised.rule) == (Tier.APPROVE, "rival")
    assert settled(raised, "U_ALICE") is raised  # not self any more: its person does not decide it
    floor = policy.evaluate("send_as_me", {"to": "bob"}, PolicyContext(now=0.0, min_tier=Tier.APPROVE))
    assert floor.tier is Tier.APPROVE
    assert policy.evaluate("read_mail", {"count": 500}, PolicyContext(now=0.0)).tier is Tier.SELF  # a rule raises
    assert policy.evaluate("read_mail", {"count": 5}, PolicyContext(now=0.0)).tier is Tier.AUTO
    # A floor below the tool's tier (the only tier a caller can name) never lowers it.
    assert policy.evaluate("send_as_me", {"to": "bob"}, PolicyContext(now=0.0, min_tier=Tier.AUTO)).tier is Tier.SELF


def test_a_trust_never_reaches_a_self_tool_nor_a_call_a_rule_raised_to_self() -> None:
    policy = _policy()
    fell_back = settled(policy.evaluate("send_as_me", {"to": "bob"}, PolicyContext(now=0.0)), None)
    assert fell_back.tier is Tier.APPROVE and not fell_back.trustable  # nobody known: the Trust button is refused
    assert not policy.trust_matters("send_as_me")
    # A grant recorded before (a reload put the tool at self) lets nothing through: the person still confirms.
    granted = PolicyContext(now=0.0, trusted_tools=frozenset({"send_as_me", "read_mail"}))
    assert policy.evaluate("send_as_me", {"to": "bob"}, granted).tier is Tier.SELF
    raised = policy.evaluate("read_mail", {"count": 500}, PolicyContext(now=0.0))
    assert raised.tier is Tier.SELF and not raised.trustable
