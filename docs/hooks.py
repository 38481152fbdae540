"""MkDocs hooks: the HTTP API page's endpoint reference, rendered from hitl's OpenAPI document at build time; and the
Python API reference's cross-references in a reader's words.

Each operation gets its own heading (a path never breaks mid-word in a narrow table cell), its parameters, the
schema of its request body and its responses in code order; each schema gets a table of its fields. A reader sees
what to send and what comes back without opening ``openapi.json``.
"""

from __future__ import annotations

import re
from typing import Any

from hitl.api.app import openapi_document

MARK = "<!-- openapi -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page with the marker replaced by the rendered reference (other pages untouched)."""
    if MARK not in markdown:
        return markdown
    return markdown.replace(MARK, render(openapi_document()))


_ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):<code>~?([\w.]+)</code>")
"""A Sphinx role in a docstring as mkdocstrings renders it: ``:class:<code>~hitl.engine.x.Name</code>``."""


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """The reference's docstrings name other code as Sphinx roles (for the source's readers): shown as the name
    alone, in code, never an internal module path."""
    return _ROLE.sub(lambda m: f"<code>{m.group(1).rsplit('.', 1)[-1]}</code>", html)


def render(spec: dict[str, Any]) -> str:
    """The operations, one section each, then the schemas they name, one field table each."""
    out: list[str] = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and not method.startswith("x-"):
                out += _operation(method, path, op)
    out += ["## Schemas", ""]
    for name, schema in sorted(spec["components"]["schemas"].items()):
        out += _schema(name, schema)
    return "\n".join(out) + "\n"


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    out = [
        f"### `{method.upper()}` `{path}`",
        "",
        _cell(str(op.get("summary") or op.get("description") or "")),
        "",
    ]
    params = op.get("parameters") or []
    if params:
        out += ["| parameter | in | type | required |", "|---|---|---|---|"]
        out += [
            f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | {'yes' if p.get('required') else 'no'} |"
            for p in params
        ]
        out.append("")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        out += [f"**Request body:** {_type(body)}", ""]
    out += ["| response | body | when |", "|---|---|---|"]
    for code, response in sorted(op.get("responses", {}).items()):
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        shown = _type(schema) if schema is not None else "none"
        out.append(f"| `{code}` | {shown} | {_cell(str(response.get('description', '')))} |")
    return [*out, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name}", ""]
    if schema.get("description"):
        out += [_cell(str(schema["description"])), ""]
    if "enum" in schema:
        return [*out, "One of: " + ", ".join(f"`{v}`" for v in schema["enum"]), ""]
    properties = schema.get("properties") or {}
    if not properties:
        return [*out, f"Type: {_type(schema)}", ""]
    required = set(schema.get("required") or ())
    out += ["| field | type | required | notes |", "|---|---|---|---|"]
    for field, prop in properties.items():
        out.append(f"| `{field}` | {_type(prop)} | {'yes' if field in required else 'no'} | {_notes(prop)} |")
    return [*out, ""]


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link for a named schema, ``list of X``, ``X or null``."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _type(schema["allOf"][0])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {_type(schema['additionalProperties'])}"
    return str(kind or "any")


def _notes(prop: dict[str, Any]) -> str:
    """What a field's schema adds beyond its type: limits, a default, a description."""
    notes = []
    for key, word in (
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minimum", "min"),
        ("maximum", "max"),
    ):
        if key in prop:
            notes.append(f"{word} {prop[key]}")
    if "default" in prop and prop["default"] not in (None, "", [], {}):
        notes.append(f"default `{prop['default']}`")
    if prop.get("description"):
        notes.append(_cell(str(prop["description"])))
    return "; ".join(notes)


def _cell(text: str) -> str:
    """Text for a table cell or a line: one line, pipes escaped."""
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip()
