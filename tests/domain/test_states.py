from __future__ import annotations

import itertools
import re
from pathlib import Path

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


def test_the_concepts_page_names_every_move_of_the_table_and_no_other() -> None:
    """The glossary's states list (docs/pages/concepts.md) is read as the table: each `a -> b | c -> d` in it
    names the moves a->b, a->c, b->d, c->d; together they are exactly the table's, so a move added to the table
    (``executing -> executing``, a dead claim taken over) is added to the page too."""
    page = (Path(__file__).parents[2] / "docs" / "pages" / "concepts.md").read_text()
    [states] = re.findall(r"^- \*\*States\*\*:(.*?)(?=^- \*\*)", page, flags=re.S | re.M)
    named: set[tuple[Status, Status]] = set()
    for chain in re.findall(r"`([a-z |>-]+->[a-z |>-]+)`", states):
        steps = [[Status(s.strip()) for s in part.split("|")] for part in chain.split("->")]
        named |= {(a, b) for before, after in itertools.pairwise(steps) for a in before for b in after}
    assert named == {(a, b) for a, moves in TRANSITIONS.items() for b in moves}
