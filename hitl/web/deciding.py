"""A decision from the decision page's form, made through the same lifecycle call as a Slack click or the API
(roles re-checked, quorum, separation of duties, typed confirmation, required reasons, the schema's validation),
bound to the version, action hash and view digest the page drew, and recorded ``via web``."""

from __future__ import annotations

import json
import re
from typing import Any

from hitl.api.context import ApiContext
from hitl.api.problems import from_engine
from hitl.api.tokens import Caller
from hitl.bot.views.form_errors import attention_errors, reason_errors
from hitl.engine.domain.hashing import exact_int
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import DecisionRefused, EngineError, InvalidInput, NotFound

__all__ = ["VIA", "Refusal", "decide_from_form"]

VIA = "web"
"""The channel a web decision is recorded with."""
MAX_FIELD = 20_000
"""Characters one form field may hold."""
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _json_value(name: str, text: str) -> Any:
    try:
        return json.loads(text, parse_int=exact_int)
    except (ValueError, InvalidInput):
        raise ValueError(f"{name} must be JSON (a number, true/false, null, a list or an object)") from None


def _edit(approval: Approval, form: dict[str, str]) -> dict[str, Any]:
    """The Modify form's changed arguments, typed as the current values are (text stays text, the rest is JSON)."""
    patch: dict[str, Any] = {}
    for name, current in approval.execute_args.items():
        typed = form.get(f"arg:{name}")
        if typed is None:
            continue
        value = typed if isinstance(current, str) else _json_value(name, typed)
        if value != current:
            patch[name] = value
    return patch


Refusal = tuple[int, str, dict[str, str]]
"""A decision the page could not record: the HTTP status, the message over the page, and the message under each
wrong field of the form that was sent (keyed as Slack's form keys them: :mod:`hitl.bot.views.form_errors`)."""


def _field_errors(approval: Approval, kind: DecisionKind, form: dict[str, str], args: Any) -> dict[str, str]:
    """What is wrong with the form, field by field, in the words Slack's form uses (the engine still decides),
    each keyed ``decision:field`` so the page puts it under that field of the form that was sent."""
    reason = form.get("reason")
    if kind in (DecisionKind.APPROVE, DecisionKind.MODIFY):
        confirm = {k.removeprefix("confirm:"): v for k, v in form.items() if k.startswith("confirm:")}
        errors = attention_errors(approval, confirm, reason, {**approval.execute_args, **(args or {})})
    else:
        errors = reason_errors(approval, kind, reason)
    return {f"{kind}:{field}": text for field, text in errors.items()}


async def decide_from_form(ctx: ApiContext, caller: Caller, approval: Approval, form: dict[str, str]) -> Refusal | None:
    """Decide as ``form`` says; None when recorded, else what to show on the page (:data:`Refusal`)."""
    if any(len(v) > MAX_FIELD for v in form.values()):
        return 422, f"a field is over {MAX_FIELD} characters", {}
    action_hash, view_digest = form.get("action_hash", ""), form.get("view_digest", "")
    if not (_DIGEST.fullmatch(action_hash) and _DIGEST.fullmatch(view_digest)):
        # The page's forms always carry both: without them the decision would bind to no action and record that
        # no view was shown, as the API's action_hash and view_digest fields refuse too.
        return 422, "the form lacks the action hash or view digest the page drew: reload the page and decide again", {}
    try:
        kind = DecisionKind(form.get("decision", ""))
        version = int(form.get("expected_version", ""))
        args = _edit(approval, form) if kind is DecisionKind.MODIFY else None
        # Typed text, compared by the engine as a click's form is (numbers as exact decimals, text exactly).
        confirm = {k.removeprefix("confirm:"): v for k, v in form.items() if k.startswith("confirm:")}
    except ValueError as exc:
        return 422, f"the form is invalid: {exc}", {}
    reviewer = await ctx.reviewer(caller, approval)  # the roles as the configuration gives them now
    try:
        await ctx.lifecycle.decide(
            DecideRequest(
                approval.id,
                reviewer,
                kind,
                expected_version=version,
                expected_hash=action_hash,
                reason=form.get("reason") or None,
                args=args,
                via=VIA,
                view_digest=view_digest,
                confirm=confirm or None,
            ),
            seen=approval,
        )
    except DecisionRefused as exc:
        try:
            current = await ctx.lifecycle.store.approvals.get(approval.id)
        except NotFound:
            current = None
        err = from_engine(exc, current)
        return err.status, err.detail.message, _field_errors(approval, kind, form, args)
    except EngineError as exc:
        err = from_engine(exc, approval)
        return err.status, err.detail.message, _field_errors(approval, kind, form, args)
    return None
