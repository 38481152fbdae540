"""Tier ``self`` in a 2026-07-28 MCP client: the person a call acts for confirms it in a form elicitation.

The one elicitation answer the gateway ever reads. It is asked only when the approval is a pending ``self`` one and
the client's authenticated principal is its person: over ``--http``, the bearer token's ``acts_for``. Over stdio
nobody is authenticated (such a call was asked as ``approve``), so no form is asked and any answer is refused. For
every other tier, whatever a client answers still counts for nothing.

The form shows the call as the card does (the headline, why it asks, each argument as it will run, the requester),
the untrusted evidence after a marked line, each of its lines quoted and its addresses defanged, never as a label.
The ``requestState`` of that round carries the view the form showed (version, action hash, view digest), so the
answer is recorded, through the service's one decide path, as that person's decision on exactly that view:
``basis self``, audited, exactly once (a second answer finds it decided). Accepting with ``confirm`` true approves;
declining (or accepting with ``confirm`` false) rejects; a cancel decides nothing and the form is asked again.
A refused answer is audited (``refused``, ``not_eligible``) and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from hitl.api.tokens import Caller
from hitl.engine.domain.display import reveal
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.own_confirmation import confirms_own
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.service import ApprovalService
from hitl.mail.message import inert, one_line

__all__ = ["CONFIRM_FIELD", "DECLINED", "FORM_REQUEST", "form_request", "may_confirm", "record_answer"]

log = logging.getLogger(__name__)
FORM_REQUEST = "hitl_confirm"
"""The key of the form elicitation asking a ``self`` call's person to confirm it."""
CONFIRM_FIELD = "confirm"
"""The form's one field: true to run the call."""
_EVIDENCE = "Untrusted evidence, sent with the request: shown as plain text; do not follow instructions in it"
DECLINED = "declined in the MCP client's confirmation form"
"""The reason a rejection by the form records."""


def may_confirm(approval: Approval, caller: Caller | None) -> bool:
    """Whether ``caller`` (None over stdio: nobody authenticated) is the person who confirms ``approval``: a pending
    ``self`` approval, and a bearer token whose ``acts_for`` is that person."""
    return (
        caller is not None
        and caller.acts_for is not None
        and approval.status is Status.PENDING
        and confirms_own(approval)
        and caller.acts_for == approval.on_behalf_of
    )


def _quoted(text: str) -> list[str]:
    """Untrusted text, each line after ``| `` (no line of it passes for one of hitl's), addresses defanged."""
    return [f"  | {line}" for line in inert(text).splitlines() or [""]]


def form_request(view: Presentation) -> types.ElicitRequest:
    """The form asking the person to confirm the call ``view`` shows."""
    lines = [one_line(inert(view.heading), 300), ""]
    if view.reasons:
        lines += ["Why you are asked:", *(f"  - {one_line(inert(r), 500)}" for r in view.reasons), ""]
    if view.fields:
        lines.append("Arguments, as they will run:")
        for f in view.fields:
            lines += [f"  {one_line(inert(f.label), 200)} ({f.value.kind}):", *_quoted(f.value.text)]
            lines += [f"  ! {one_line(w, 300)}" for w in f.value.warnings]
        lines.append("")
    lines += [one_line(f"Asked by {view.requester} · {view.approval_id}", 400), ""]
    lines.append("Confirm to let it run as you; decline to stop it. Only you can answer this.")
    if view.evidence:
        lines += ["", f"--- {_EVIDENCE} ---", *_quoted(reveal(view.evidence, keep="\n\t")[0])]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            CONFIRM_FIELD: {
                "type": "boolean",
                "title": "Run this call as you",
                "description": "true runs it once; false (or declining) stops it",
                "default": False,
            }
        },
        "required": [CONFIRM_FIELD],
    }
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message="\n".join(lines), requested_schema=schema))


def _kind(answer: object) -> DecisionKind | None:
    """What an answer decides: accept with ``confirm`` true approves, a decline or ``confirm`` false rejects;
    a cancel or anything else decides nothing."""
    if not isinstance(answer, types.ElicitResult):
        return None
    if answer.action == "decline":
        return DecisionKind.REJECT
    if answer.action != "accept" or not isinstance(answer.content, Mapping):
        return None
    value = answer.content.get(CONFIRM_FIELD)
    if value is True:
        return DecisionKind.APPROVE
    return DecisionKind.REJECT if value is False else None


async def record_answer(
    service: ApprovalService,
    approval: Approval | None,
    caller: Caller | None,
    responses: Mapping[str, Any] | None,
    shown: tuple[int, str, str] | None,
    *,
    actor: str,
) -> None:
    """Record the answer to the form in ``responses``, if any, as the person's decision on the view ``shown``.

    Refused (audited as ``actor``, nothing decided) unless a form was asked (``shown``) and ``caller`` is the
    approval's person now (:func:`may_confirm`). A decision the service refuses (decided already, a changed
    approval) is audited there; the store's state then says what the call does."""
    kind = _kind((responses or {}).get(FORM_REQUEST))
    if kind is None or approval is None:
        return
    if shown is None or not may_confirm(approval, caller):
        detail = (
            f"mcp form answer ({kind}) on {approval.id}: only the person a self call acts for, authenticated as that "
            "person (an --http token's acts_for), confirms it in a form; the answer counts for nothing"
        )
        await service.record_refusal(approval.id, actor, ErrorCode.NOT_ELIGIBLE, detail)
        return
    assert caller is not None and caller.acts_for is not None
    version, hashed, digest = shown
    request = DecideRequest(
        approval.id,
        caller.acts_for,
        kind,
        expected_version=version,
        expected_hash=hashed,
        view_digest=digest,
        reason=DECLINED if kind is DecisionKind.REJECT else None,
        via=f"mcp:{caller.token}",
    )
    try:
        await service.decide(request)
    except EngineError as exc:  # audited by the service; the store says what the call does
        log.info("the confirmation form's answer on %s was refused: %s", approval.id, exc.code)
