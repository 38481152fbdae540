"""One reviewer directory protocol: hitl.yaml's roles, Slack (user groups expanded) and API tokens each implement
it, and answer alike where they should: the same person, the same roles, unless a group or a token says otherwise."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from hitl.api.context import TokenReviewers
from hitl.api.tokens import Caller
from hitl.bot.outbound.reviewers import SlackReviewers
from hitl.engine.clocks import FakeClock
from hitl.engine.config.api import Scope
from hitl.engine.domain.reviewers import ConfiguredReviewers, Roles
from hitl.engine.errors import InvalidInput
from hitl.engine.ports import ReviewerDirectory

ROLES = Roles.from_config({"support": ["U_S1", "U_BOTH"], "finance": ["U_F1", "U_BOTH"]})


def _caller(reviewer: str, roles: frozenset[str] | None) -> Caller:
    return Caller(reviewer=reviewer, token="t", scopes=frozenset({Scope.DECIDE}), roles=roles, tools=None)


def _directories() -> dict[str, ReviewerDirectory]:
    configured = ConfiguredReviewers(ROLES)
    # No user group is named, so the Slack directory asks Slack nothing (the client points nowhere).
    slack = SlackReviewers(ROLES, AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/"), FakeClock())
    return {
        "configured": configured,
        "slack": slack,
        "token": TokenReviewers(_caller("U_BOTH", None), configured),
    }


@pytest.mark.parametrize("name", ["configured", "slack", "token"])
async def test_every_directory_is_one_protocol_and_answers_the_same(name: str) -> None:
    directory = _directories()[name]
    assert isinstance(directory, ReviewerDirectory)
    both = await directory.reviewer("U_BOTH")
    assert both.id == "U_BOTH" and both.roles == {"support", "finance"}
    stranger = await directory.reviewer("U_NOBODY")
    assert stranger.id == "U_NOBODY" and stranger.roles == frozenset()  # a stranger holds no role
    with pytest.raises(InvalidInput, match="not a valid reviewer id"):
        await directory.reviewer("")


async def test_a_token_narrows_the_roles_it_was_given() -> None:
    narrowed = TokenReviewers(_caller("U_BOTH", frozenset({"support"})), ConfiguredReviewers(ROLES))
    assert (await narrowed.reviewer("U_BOTH")).roles == {"support"}
    # A token never grants a role the configuration does not give.
    widened = TokenReviewers(_caller("U_S1", frozenset({"support", "finance"})), ConfiguredReviewers(ROLES))
    assert (await widened.reviewer("U_S1")).roles == {"support"}
