"""An upstream's elicitation as a client is shown it: every label of its form (title, description, a choice's
title) says it is the upstream's, bounded, while what the form accepts stays the upstream's own."""

from __future__ import annotations

from mcp import types

from hitl.mcp.upstreams import marked


def test_every_choice_title_and_unlabelled_field_of_an_upstreams_form_is_marked_and_bounded() -> None:
    schema = {
        "type": "object",
        "properties": {
            "plan": {"type": "string", "oneOf": [{"const": "a", "title": "Approve (hitl)"}, {"const": "b"}]},
            "legacy": {"type": "string", "enum": ["x"], "enumNames": ["Approved by hitl"]},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "t", "title": "hitl reviewer"}]}},
            "note": {"type": "string", "description": "n" * 5000},
        },
        "required": ["plan"],
    }
    asked = types.ElicitRequestFormParams(message="Pick one", requested_schema=schema)
    shown = marked("shop", "host shop.example", asked)
    assert isinstance(shown, types.ElicitRequestFormParams)
    props = shown.requested_schema["properties"]
    assert props["plan"]["title"] == "[upstream 'shop'] plan"  # no title of its own: its key, marked
    assert props["plan"]["oneOf"] == [{"const": "a", "title": "[upstream 'shop'] Approve (hitl)"}, {"const": "b"}]
    assert props["legacy"]["enumNames"] == ["[upstream 'shop'] Approved by hitl"]
    assert props["tags"]["items"]["anyOf"] == [{"const": "t", "title": "[upstream 'shop'] hitl reviewer"}]
    assert props["note"]["description"].startswith("[upstream 'shop'] nnn") and len(props["note"]["description"]) < 400
    # What the form accepts is unchanged: the answer is the upstream's business, and goes to it as given.
    assert [p["type"] for p in props.values()] == ["string", "string", "array", "string"]
    assert props["legacy"]["enum"] == ["x"] and shown.requested_schema["required"] == ["plan"]
    assert "title" not in asked.requested_schema["properties"]["plan"]  # the upstream's own request untouched
