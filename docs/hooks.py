"""MkDocs hook: the HTTP API page's endpoint reference, rendered from hitl's OpenAPI document at build time."""

from __future__ import annotations

from typing import Any

from hitl.api.app import openapi_document

MARK = "<!-- openapi -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARK not in markdown:
        return markdown
    return markdown.replace(MARK, render(openapi_document()))


def render(spec: dict[str, Any]) -> str:
    """One table row per operation (method, path, summary, scopes, responses), then each operation's parameters."""
    out = ["| method | path | what it does | responses |", "|---|---|---|---|"]
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or method.startswith("x-"):
                continue
            codes = ", ".join(f"`{code}`" for code in op.get("responses", {}))
            summary = str(op.get("summary") or op.get("description") or "").replace("|", "\\|").split("\n")[0]
            out.append(f"| `{method.upper()}` | `{path}` | {summary} | {codes} |")
    return "\n".join(out) + "\n"
