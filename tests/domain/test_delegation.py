"""Delegation's rules, pure: at most 30 days, only the delegator's own roles (never re-delegated), one person with
the delegate while in force, a date read in the delegator's time zone and echoed in UTC."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from hitl.engine.domain.decide import acting_for
from hitl.engine.domain.delegation import (
    MAX_DAYS,
    Delegation,
    acting_reviewer,
    delegation_problem,
    parse_until,
    utc_text,
    zone,
)
from hitl.engine.domain.models import Reviewer
from hitl.testing import make_approval

NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC
DAY = 86400.0
OWN = {"U_ANA": frozenset({"finance", "legal"}), "U_BEN": frozenset({"support"}), "U_CY": frozenset({"finance"})}


def _d(delegator: str, delegate: str, *, role: str | None = None, days: float = 7, **kw: object) -> Delegation:
    return Delegation.model_validate(
        {
            "id": f"dlg_{delegator}_{delegate}",
            "delegator": delegator,
            "delegate": delegate,
            "role": role,
            "given_at": NOW,
            "until": NOW + days * DAY,
            **kw,
        }
    )


def _as(who: str, found: list[Delegation], now: float = NOW) -> Reviewer:
    me = Reviewer(id=who, roles=OWN.get(who, frozenset()))
    return acting_reviewer(me, found, now=now, own_roles=lambda x: OWN.get(x, frozenset()))


def test_a_date_is_the_end_of_that_day_in_the_delegators_time_zone_echoed_in_utc() -> None:
    la = zone("America/Los_Angeles")
    until = parse_until("2027-01-20", la)
    assert until == datetime(2027, 1, 21, tzinfo=ZoneInfo("America/Los_Angeles")).timestamp()
    assert utc_text(until) == "2027-01-21 08:00 UTC"  # midnight in Los Angeles, in UTC
    assert utc_text(parse_until("2027-01-20 17:30", zone("Europe/Paris"))) == "2027-01-20 16:30 UTC"
    assert utc_text(parse_until("2027-01-20T17:30:00+05:00", la)) == "2027-01-20 12:30 UTC"  # its own offset wins
    assert utc_text(parse_until("2027-01-20", zone(None))) == "2027-01-21 00:00 UTC"


@pytest.mark.parametrize("text", ["tomorrow", "2027-02-30", "20-01-2027", "", "2027-01-20 25:00"])
def test_what_is_not_a_date_says_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        parse_until(text, zone("UTC"))


def test_an_unknown_time_zone_says_what_to_name() -> None:
    with pytest.raises(ValueError, match="Europe/Paris"):
        zone("Mars/Olympus")


def test_what_may_be_delegated() -> None:
    ana = Reviewer(id="U_ANA", roles=OWN["U_ANA"])

    def problem(delegate: str = "U_BEN", role: str | None = None, days: float = 7, who: Reviewer = ana) -> str | None:
        return delegation_problem(delegator=who, delegate=delegate, role=role, until=NOW + days * DAY, now=NOW)

    assert problem() is None and problem(role="legal") is None and problem(days=MAX_DAYS) is None
    assert "yourself" in str(problem(delegate="U_ANA"))
    assert "does not hold the role 'support'" in str(problem(role="support"))
    assert f"at most {MAX_DAYS} days" in str(problem(days=MAX_DAYS + 0.01))
    assert "has passed" in str(problem(days=-1)) and "has passed" in str(problem(days=0))
    assert "holds no reviewer role" in str(problem(who=Reviewer(id="U_NOBODY")))


def test_a_delegate_holds_the_delegators_own_roles_and_is_one_person_with_them() -> None:
    ben = _as("U_BEN", [_d("U_ANA", "U_BEN", role="finance")])
    assert ben.roles == {"support", "finance"} and ben.delegated == (("finance", "U_ANA"),)
    assert ben.people == {"U_BEN", "U_ANA"}
    assert _as("U_ANA", [_d("U_ANA", "U_BEN")]).people == {"U_ANA", "U_BEN"}  # the delegator keeps their own roles
    assert _as("U_ANA", [_d("U_ANA", "U_BEN")]).roles == OWN["U_ANA"]
    everything = _as("U_BEN", [_d("U_ANA", "U_BEN")])
    assert dict(everything.delegated) == {"finance": "U_ANA", "legal": "U_ANA"}
    assert everything.in_own_right() == Reviewer(id="U_BEN", roles=OWN["U_BEN"])


def test_a_delegated_role_is_never_delegated_again() -> None:
    # Ana hands her roles to Ben; Ben hands his to Cy: Cy gets Ben's own role, never Ana's.
    found = [_d("U_ANA", "U_BEN"), _d("U_BEN", "U_CY")]
    cy = _as("U_CY", found)
    assert dict(cy.delegated) == {"support": "U_BEN"} and "legal" not in cy.roles
    assert cy.people == {"U_CY", "U_BEN"}


def test_an_ended_or_run_out_delegation_hands_nothing_on() -> None:
    ended = _d("U_ANA", "U_BEN", ended_at=NOW + 10, ended_by="U_ANA")
    assert _as("U_BEN", [ended], now=NOW + 11) == Reviewer(id="U_BEN", roles=OWN["U_BEN"])
    assert _as("U_BEN", [_d("U_ANA", "U_BEN", days=1)], now=NOW + DAY).delegated == ()
    assert _as("U_BEN", [_d("U_ANA", "U_BEN")], now=NOW - 1).delegated == ()  # not yet given


def test_whom_a_decision_acts_for() -> None:
    ben = _as("U_BEN", [_d("U_ANA", "U_BEN")])
    finance = make_approval(now=NOW, role="finance")
    support = make_approval(now=NOW, role="support", key="s")
    anyone = make_approval(now=NOW, role=None, key="a")
    assert acting_for(finance, ben, NOW) == "U_ANA"
    assert acting_for(support, ben, NOW) is None  # his own role wins
    assert acting_for(anyone, ben, NOW) is None  # he holds a role himself
    handed = support.model_copy(update={"backup_role": "legal", "hand_on_at": NOW})
    assert acting_for(handed, ben, NOW) is None  # support is his own, even once legal may decide it too
    stranger = _as("U_DEE", [_d("U_ANA", "U_DEE")])
    assert acting_for(anyone, stranger, NOW) == "U_ANA"  # any role will do, and only a delegated one is held
    legal_only = make_approval(now=NOW, role="support", key="l").model_copy(
        update={"backup_role": "legal", "hand_on_at": NOW}
    )
    assert acting_for(legal_only, stranger, NOW) == "U_ANA"
