"""Who a verified ID token names, as a reviewer id: the identity is ``(iss, sub)``; Slack's sign-in gives the Slack
user id a click carries (from the configured workspace only); other providers' subjects, or e-mails their issuer
verified, map through ``web.subjects`` and ``web.emails``."""

from __future__ import annotations

from typing import Any

from hitl.engine.config.web import WebSpec

__all__ = ["SLACK_TEAM", "SLACK_USER", "reviewer_of", "still_maps"]

SLACK_USER = "https://slack.com/user_id"
SLACK_TEAM = "https://slack.com/team_id"


def reviewer_of(web: WebSpec, claims: dict[str, Any]) -> str | None:
    """The reviewer id for verified ``claims`` (issued by ``web.oidc.issuer``), or None: nobody hitl knows."""
    team = web.oidc.slack_team_id
    if team is not None:
        # Every Slack workspace shares the issuer: only the configured one's people are ours.
        user = claims.get(SLACK_USER)
        if claims.get(SLACK_TEAM) == team and isinstance(user, str) and user:
            return user
        return None
    sub = claims.get("sub")
    if isinstance(sub, str) and sub in web.subjects:
        return web.subjects[sub]
    email = claims.get("email")
    if claims.get("email_verified") is True and isinstance(email, str):
        return web.emails.get(email.lower()) or web.emails.get(email)
    return None


def still_maps(web: WebSpec, subject: str, reviewer: str) -> bool:
    """Whether a session of ``subject``, signed in as ``reviewer``, is still that reviewer under ``web``'s mappings
    (without Slack's sign-in): its subject maps to them, or, unmapped, some verified e-mail still does (the session
    kept no e-mail to check which)."""
    if subject in web.subjects:
        return web.subjects[subject] == reviewer
    return reviewer in web.emails.values()
