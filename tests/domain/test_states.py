from __future__ import annotations

import pytest

from hitl.engine.domain.models import Status
from hitl.engine.domain.states import TERMINAL, TRANSITIONS, check_transition, sources_of
from hitl.engine.errors import ErrorCode, IllegalTransition


def test_table_matches_the_design() -> None:
    assert TRANSITIONS[Status.PENDING] == {
        Status.APPROVED,
        Status.REJECTED,
        Status.EXPIRED,
        Status.CANCELLED,
        Status.SUPERSEDED,
    }
    # superseded or expired: its consequence drifted before it ran (asked again; after 3, expired as drifted)
    assert TRANSITIONS[Status.APPROVED] == {Status.EXECUTING, Status.SUPERSEDED, Status.EXPIRED}
    assert TRANSITIONS[Status.EXECUTING] >= {Status.EXECUTED, Status.FAILED}
    assert TERMINAL == {
        Status.REJECTED,
        Status.EXPIRED,
        Status.CANCELLED,
        Status.SUPERSEDED,
        Status.EXECUTED,
        Status.FAILED,
    }
    assert set(TRANSITIONS) == set(Status)
    assert sources_of(Status.EXECUTING) == {Status.APPROVED, Status.EXECUTING}


@pytest.mark.parametrize("current", list(Status))
@pytest.mark.parametrize("target", list(Status))
def test_every_illegal_move_names_both_states(current: Status, target: Status) -> None:
    if target in TRANSITIONS[current]:
        check_transition(current, target)
        return
    with pytest.raises(IllegalTransition) as err:
        check_transition(current, target, approval_id="apr_X")
    assert err.value.code is ErrorCode.ILLEGAL_TRANSITION
    assert str(current) in err.value.message and str(target) in err.value.message
