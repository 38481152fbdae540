"""Modals: Modify (typed inputs from the tool's schema), Reject (reason), Feedback, Reject all (a group's reason), and
Approve for an approval that asks more than a click (the values to type, a reason)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hitl.bot.requests.payloads import Cell
from hitl.bot.views.arguments import name_line
from hitl.bot.views.escape import label
from hitl.engine.domain.arg_schema import ArgField, coerce_text, fields_of, json_number, schema_errors
from hitl.engine.domain.display import graphemes_cut, show
from hitl.engine.domain.hashing import exact_int, normalize
from hitl.engine.domain.models import Approval, ApprovalKind
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.errors import InvalidInput

__all__ = [
    "ANSWER_BLOCK",
    "CALLBACK_ANSWER",
    "CALLBACK_APPROVE",
    "CALLBACK_FEEDBACK",
    "CALLBACK_GROUP_REJECT",
    "CALLBACK_MODIFY",
    "CALLBACK_REJECT",
    "FORM_ANSWER",
    "FORM_APPROVE",
    "FORM_FEEDBACK",
    "FORM_GROUP_REJECT",
    "FORM_MODIFY",
    "FORM_REJECT",
    "FormValues",
    "answer_view",
    "approve_view",
    "attended_values",
    "form_value",
    "group_reason_view",
    "modify_view",
    "parse_modify",
    "reason_view",
]

FORM_MODIFY = "modify"
FORM_REJECT = "reject"
FORM_FEEDBACK = "feedback"
FORM_GROUP_REJECT = "group_reject"
FORM_APPROVE = "approve"
FORM_ANSWER = "answer"
"""Form kinds, signed into each modal's metadata so a form cannot be submitted as another kind."""
CALLBACK_MODIFY = "hitl_modify_submit"
CALLBACK_REJECT = "hitl_reject_submit"
CALLBACK_FEEDBACK = "hitl_feedback_submit"
CALLBACK_GROUP_REJECT = "hitl_group_reject_submit"
CALLBACK_APPROVE = "hitl_approve_submit"
CALLBACK_ANSWER = "hitl_answer_submit"
ANSWER_BLOCK = "hitl_answer"
"""The block id of the answer form's one input."""
CONFIRM_FIELD = "hitl_confirm:"
"""Block id prefix of each value an approval asks its reviewer to type (the argument's name follows)."""
_FIELD = "hitl_field:"
_WHOLE = "hitl_args"


def _pt(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": False}


def modify_view(
    a: Approval, schema: dict[str, Any] | None, metadata: str, *, declared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Inputs typed from the approval's JSON Schema, pre-filled with the proposal; without a schema (approvals
    made before schemas were snapshotted) one JSON editor for the whole argument object. Each input is labelled
    with the argument's name; its help comes only from ``declared`` (``hitl.yaml``'s schema), never from a schema
    the caller sent."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"Edit the arguments of `{label(a.tool, 60)}`. "
                "The policy runs again on your edit: if it needs other approvers, a new "
                "request goes to them.",
            },
        },
    ]
    if schema is None:
        blocks.append(_json_editor(a.execute_args))
    else:
        props = (declared or {}).get("properties")
        helps = props if isinstance(props, dict) else {}
        for f in fields_of(schema)[:90]:
            spec = helps.get(f.name)
            about = spec.get("description") if isinstance(spec, dict) else None
            blocks.append(_input(f, a.execute_args.get(f.name), about if isinstance(about, str) else ""))
    blocks += _attention_blocks(a, modify=True)
    return {
        "type": "modal",
        "callback_id": CALLBACK_MODIFY,
        "private_metadata": metadata,
        "title": _pt("Modify action"),
        "submit": _pt("Approve edit"),
        "close": _pt("Cancel"),
        "blocks": blocks,
    }


def answer_view(a: Approval, schema: Mapping[str, Any] | None, metadata: str) -> dict[str, Any]:
    """The form a question's (``ask_person``) Answer opens: one text input, as long as the question's schema lets an
    answer be. The question is not repeated here: the card shows it, boxed, as the asker's untrusted text."""
    props = (schema or {}).get("properties")
    spec = props.get("answer") if isinstance(props, dict) else None
    most = spec.get("maxLength") if isinstance(spec, dict) else None
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": "value", "multiline": True}
    element["max_length"] = most if isinstance(most, int) and 0 < most <= 3000 else 3000  # Slack's own bound
    return {
        "type": "modal",
        "callback_id": CALLBACK_ANSWER,
        "private_metadata": metadata,
        "title": _pt("Answer question"),
        "submit": _pt("Send answer"),
        "close": _pt("Cancel"),
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"`{a.id}` · the question is on the card; your answer goes back."},
            },
            {"type": "input", "block_id": ANSWER_BLOCK, "label": _pt("Your answer"), "element": element},
        ],
    }


def approve_view(
    a: Approval, metadata: str, *, view: Presentation | None = None, declared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The form Approve opens on an approval that asks more than a click: the card's headline again, and the marks
    of each value it asks for (its type, currency, look-alike and hidden characters: the card's own name line, not
    the value), and of any other argument that carries a warning; then each value the policy names (``confirm``)
    typed by the reviewer as they read it on the card, with nothing of it filled in or hinted at, and the reason
    when one is required. The engine compares what is typed with the value that runs. ``view`` and ``declared`` as
    the card takes them."""
    asked = ", ".join(f"`{label(name, 40)}`" for name in a.confirm)
    what = (
        f"To approve `{label(a.tool, 60)}`, type its {asked} as you read it on the card: it is compared exactly "
        "with the value that runs."
        if a.confirm
        else f"Approving `{label(a.tool, 60)}` needs a reason."
    )
    view = view or present(a, declared=declared)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _pt(graphemes_cut(view.heading, 150) or a.tool[:150])},
        *_marks(a, declared),
        {"type": "section", "text": {"type": "mrkdwn", "text": f"`{a.id}` · {what}"}},
        *_attention_blocks(a, modify=False),
    ]
    return {
        "type": "modal",
        "callback_id": CALLBACK_APPROVE,
        "private_metadata": metadata,
        "title": _pt("Approve action"),
        "submit": _pt("Approve"),
        "close": _pt("Cancel"),
        "blocks": blocks,
    }


def _marks(a: Approval, declared: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The name line the card draws for each argument the form asks for, and for each other one with a warning:
    its type and currency, and every look-alike or hidden-character warning (never its value)."""
    props = (declared or {}).get("properties")
    specs: Mapping[str, Any] = props if isinstance(props, dict) else {}
    lines = []
    for name, value in list(a.execute_args.items())[:40]:
        spec = specs.get(name)
        spec = spec if isinstance(spec, dict) else None
        shown = show(value, declared=spec)
        if name in a.confirm or shown.warnings:
            line = name_line(name, shown, spec, most_warnings=10)
            lines.append({"type": "rich_text_section", "elements": line})
    return [{"type": "rich_text", "block_id": "hitl_marks", "elements": lines}] if lines else []


def _attention_blocks(a: Approval, *, modify: bool) -> list[dict[str, Any]]:
    """An input per value to type, and the reason's input when approving needs one (none when it asks nothing)."""
    out: list[dict[str, Any]] = []
    for name in a.confirm:
        out.append(
            {
                "type": "input",
                "block_id": f"{CONFIRM_FIELD}{name}",
                "label": _pt(f"Type the {name[:40]} that {'will run (as edited)' if modify else 'runs'}"),
                "hint": _pt("Typed, not copied: a wrong value approves nothing and is recorded."),
                "element": {"type": "plain_text_input", "action_id": "value", "max_length": 200},
            }
        )
    if a.approve_reason_required:
        out.append(
            {
                "type": "input",
                "block_id": "hitl_reason",
                "label": _pt("Why approve it?"),
                "element": {"type": "plain_text_input", "action_id": "value", "multiline": True, "max_length": 2000},
            }
        )
    return out


def attended_values(state_values: FormValues, a: Approval) -> tuple[dict[str, str] | None, str | None]:
    """What the reviewer typed for each value ``a`` asks to confirm (None when it asks none), and the reason."""
    typed = {name: str(form_value(state_values, f"{CONFIRM_FIELD}{name}") or "") for name in a.confirm}
    reason = form_value(state_values, "hitl_reason")
    return (typed or None), (reason if isinstance(reason, str) and reason.strip() else None)


def _json_editor(args: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(args, ensure_ascii=False, indent=1)
    return {
        "type": "input",
        "block_id": _WHOLE,
        "label": _pt("Arguments (JSON object)"),
        "hint": _pt("This request has no argument schema: the tool's own checks apply when you submit."),
        "element": {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": True,
            "max_length": 3000,
            **({"initial_value": text} if len(text) <= 3000 else {}),
        },
    }


def _input(f: ArgField, value: Any, about: str) -> dict[str, Any]:
    title = _pt(f"{f.name}{'' if f.required else ' (optional)'}"[:2000])
    block: dict[str, Any] = {
        "type": "input",
        "block_id": f"{_FIELD}{f.name}",
        "label": title,
        "optional": not f.required or f.kind == "boolean",
    }
    if about.strip():
        block["hint"] = _pt(about.strip()[:2000])
    action = "value"
    if f.enum:
        options = [{"text": _pt(o[:75]), "value": o[:150]} for o in f.enum[:100]]
        element: dict[str, Any] = {"type": "static_select", "action_id": action, "options": options}
        chosen = next((o for o in options if o["value"] == value), None)
        if chosen:
            element["initial_option"] = chosen
    elif f.kind == "boolean":
        option = {"text": _pt("Yes"), "value": "true"}
        element = {"type": "checkboxes", "action_id": action, "options": [option]}
        if value:
            element["initial_options"] = [option]
    elif f.kind in ("number", "integer"):
        element = {"type": "number_input", "action_id": action, "is_decimal_allowed": f.kind == "number"}
        if value is not None:
            element["initial_value"] = str(value)
        if f.minimum is not None:
            element["min_value"] = str(f.minimum)
        if f.maximum is not None:
            element["max_value"] = str(f.maximum)
    else:
        limit = min(f.max_length or 3000, 3000)
        text = value if isinstance(value, str) else ("" if value is None else json.dumps(value))
        element = {
            "type": "plain_text_input",
            "action_id": action,
            "max_length": limit,
            "multiline": f.multiline or f.kind in ("object", "array"),
        }
        if text:
            element["initial_value"] = text[:limit]
    block["element"] = element
    return block


FormValues = Mapping[str, Mapping[str, Cell]]
"""A submitted form's inputs by block id and action id (``view.state.values``, parsed by
:mod:`hitl.bot.requests.payloads`)."""


def form_value(state_values: FormValues, block_id: str) -> Any:
    """What the person entered in the input ``block_id`` (None when the form has no such input)."""
    cell = state_values.get(block_id, {}).get("value")  # every input of ours has action_id "value"
    return cell.read() if cell is not None else None


def parse_modify(state_values: FormValues, schema: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """Modal values -> (typed args, errors by block id). Errors go back in the ack, inline."""
    if schema is None:
        text = form_value(state_values, _WHOLE)
        try:
            whole = normalize(json.loads(text, parse_int=exact_int)) if isinstance(text, str) else None
        except InvalidInput as exc:
            return {}, {_WHOLE: exc.message[:150]}
        except ValueError:
            whole = None
        if not isinstance(whole, dict):
            return {}, {_WHOLE: 'must be a JSON object, like {"amount": 60}'}
        return whole, {}
    fields = fields_of(schema)
    raw: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in fields:
        value = form_value(state_values, f"{_FIELD}{f.name}")
        if value in (None, "") and not f.required:
            continue
        try:
            if f.kind in ("number", "integer") and isinstance(value, str) and json_number(value) is None:
                errors[f"{_FIELD}{f.name}"] = "must be a number written with the digits 0-9, like 60 or 12.5"
                continue
            if f.kind in ("object", "array") and isinstance(value, str):
                value = normalize(json.loads(value, parse_int=exact_int), path=f.name)
        except InvalidInput as exc:  # a number beyond what JSON carries exactly, here as everywhere
            errors[f"{_FIELD}{f.name}"] = exc.message[:150]
            continue
        except ValueError:  # not JSON (json's own error is a ValueError, as is int() of thousands of digits)
            errors[f"{_FIELD}{f.name}"] = "must be valid JSON"
            continue
        raw[f.name] = value
    if errors:
        return {}, errors
    typed = coerce_text(schema, raw)
    problems = schema_errors(schema, typed)
    if problems:
        # An error about the whole object (or a field the form does not show) goes under the first input.
        known = {f.name for f in fields}
        first = f"{_FIELD}{fields[0].name}" if fields else _WHOLE
        return {}, {
            f"{_FIELD}{field.split('.')[0]}" if field.split(".")[0] in known else first: msg[:150]
            for field, msg in problems.items()
        }
    return typed, {}


def reason_view(a: Approval, metadata: str, *, feedback: bool, required: bool) -> dict[str, Any]:
    """The modal asking why (a rejection's reason, or feedback on a review)."""
    doubt = a.kind is ApprovalKind.DOUBT
    if is_spot_check(a) and not feedback:
        what, title, submit = "What was wrong? (optional)", "Flag action", "Flag"
    elif doubt:
        what = "What did you find? (e.g. refund R-123 exists)" if feedback else "Why stop the run?"
        title, submit = ("Mark done", "Mark done") if feedback else ("Stop the run", "Stop")
    else:
        what = "Feedback for the previous step" if feedback else "Why reject it?"
        title, submit = ("Send feedback", "Send") if feedback else ("Reject action", "Reject")
    return {
        "type": "modal",
        "callback_id": CALLBACK_FEEDBACK if feedback else CALLBACK_REJECT,
        "private_metadata": metadata,
        "title": _pt(title),
        "submit": _pt(submit),
        "close": _pt("Cancel"),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"`{a.id}` · `{label(a.tool, 60)}`"}},
            {
                "type": "input",
                "block_id": "hitl_reason",
                "optional": not (required or feedback),
                "label": _pt(what),
                "element": {"type": "plain_text_input", "action_id": "value", "multiline": True, "max_length": 2000},
            },
        ],
    }


def group_reason_view(count: int, tool: str, metadata: str, *, required: bool) -> dict[str, Any]:
    """The modal asking why a group is rejected: one reason for each of its ``count`` pending requests."""
    return {
        "type": "modal",
        "callback_id": CALLBACK_GROUP_REJECT,
        "private_metadata": metadata,
        "title": _pt("Reject all"),
        "submit": _pt(f"Reject {count}"),
        "close": _pt("Cancel"),
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"{count} requests for `{label(tool, 60)}` will not run."},
            },
            {
                "type": "input",
                "block_id": "hitl_reason",
                "optional": not required,
                "label": _pt("Why reject them?"),
                "element": {"type": "plain_text_input", "action_id": "value", "multiline": True, "max_length": 2000},
            },
        ],
    }
