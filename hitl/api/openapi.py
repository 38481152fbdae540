"""The OpenAPI 3.1 document, generated from the route table (:mod:`.routes`) and the models it names
(:mod:`.models`): one source for the routing and validation the server does and the contract clients read.
Served at ``/api/v1/openapi.json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import models as m
from .routes import Endpoint

__all__ = ["document"]

_REF = "#/components/schemas/{model}"

_ERRORS = {
    400: "The request is malformed: not HTTP, a request line or header over the server's limits (32 KB, 16 KB), "
    "or a body that is not JSON or nests objects and arrays deeper than 64 levels.",
    401: "No valid bearer token.",
    403: "The token lacks the scope, or the reviewer may not decide this approval.",
    404: "No such approval, execution, run or workflow (or the token may not see it).",
    409: "The approval changed, was decided, expired, or its execution was claimed: reload and decide again.",
    411: "A body was sent without Content-Length.",
    413: "The body is over api.max_body.",
    415: "The body is not sent as application/json.",
    422: "A field is missing, of the wrong type, unknown, or the arguments fail the tool's schema.",
    423: "The tool is halted (the stop switch): nothing new of it is proposed, approved or executed; retry once an "
    "admin has unhalted it.",
    429: "The token is over its rate, or a cap on approvals is full (approval_flood); retry after Retry-After seconds.",
    503: "The store or hitl.yaml is unavailable; retry later.",
}
_EVERY_ROUTE = (400, 401, 429, 503)
_EVERY_BODY = (400, 411, 413, 415, 422)
_PATH_PARAM = {"type": "string", "minLength": 1, "maxLength": 400}


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}}}


def _operation(e: Endpoint) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": _PATH_PARAM} for name in e.path_params
    ]
    if e.query is not None:
        schema = e.query.model_json_schema(ref_template=_REF)
        required = set(schema.get("required", []))
        for name, prop in schema["properties"].items():
            prop = {k: v for k, v in prop.items() if k not in ("title", "description")}
            params.append({"name": name, "in": "query", "required": name in required, "schema": prop})
    codes = sorted({*_EVERY_ROUTE, *e.errors, *(_EVERY_BODY if e.body is not None else ())})
    responses: dict[str, Any] = {str(e.status): {"description": e.summary, **_json(e.ok)}}
    responses |= {str(code): {"description": _ERRORS[code], **_json(m.ErrorBody)} for code in codes}
    op: dict[str, Any] = {"summary": e.summary, "parameters": params, "responses": responses}
    if e.body is not None:
        op["requestBody"] = {"required": True, **_json(e.body)}
    return op


def document(endpoints: Sequence[Endpoint], *, prefix: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``endpoints`` (mounted at ``prefix``): their paths, parameters, bodies and
    answers, with every model they name under ``components.schemas``."""
    inputs = {x for e in endpoints for x in (e.body,) if x is not None}
    outputs = {e.ok for e in endpoints} | {m.ErrorBody}
    _, defs = models_json_schema(
        [(x, "validation") for x in sorted(inputs, key=lambda t: t.__name__)]
        + [(x, "serialization") for x in sorted(outputs, key=lambda t: t.__name__)],
        ref_template=_REF,
    )
    paths: dict[str, dict[str, Any]] = {}
    for e in endpoints:
        paths.setdefault(prefix + e.path, {})[e.method.lower()] = _operation(e)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "hitl",
            "version": "1",
            "description": "Human approval gates for agent actions. Every call needs 'Authorization: Bearer <token>'.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": defs["$defs"],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
