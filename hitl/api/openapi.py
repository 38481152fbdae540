"""The OpenAPI 3.1 document, generated from the models in :mod:`hitl.api.models` (one source for the validation
the server does and the contract clients read). Served at ``/api/v1/openapi.json``."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import models as m

__all__ = ["document"]

_REF = "#/components/schemas/{model}"
_INPUTS: list[type[BaseModel]] = [m.DecisionRequest, m.ProposalRequest, m.ClaimRequest, m.OutcomeRequest]
_INPUTS += [m.RunStartRequest, m.ResumeRequest]
_OUTPUTS: list[type[BaseModel]] = [m.ApprovalView, m.ApprovalList, m.ProposalView, m.ClaimView, m.RunView, m.AuditList]
_OUTPUTS += [m.ErrorBody]

_ERRORS = {
    "400": "The request is malformed: not HTTP, a request line or header over the server's limits (32 KB, 16 KB), "
    "or a body that is not JSON.",
    "401": "No valid bearer token.",
    "403": "The token lacks the scope, or the reviewer may not decide this approval.",
    "404": "No such approval, execution, run or workflow (or the token may not see it).",
    "409": "The approval changed, was decided, expired, or its execution was claimed: reload and decide again.",
    "411": "A body was sent without Content-Length.",
    "413": "The body is over api.max_body.",
    "415": "The body is not sent as application/json.",
    "422": "A field is missing, of the wrong type, unknown, or the arguments fail the tool's schema.",
    "429": "The token is over its rate; retry after Retry-After seconds.",
    "503": "The store or hitl.yaml is unavailable; retry later.",
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": _ref(model)}}}


def _op(
    summary: str,
    ok: tuple[str, type[BaseModel]],
    errors: list[str],
    *,
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    path: list[str] | None = None,
) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    for name in path or []:
        params.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": {"type": "string", "minLength": 1, "maxLength": 400},
            }
        )
    if query is not None:
        schema = query.model_json_schema(ref_template=_REF)
        required = set(schema.get("required", []))
        for name, prop in schema["properties"].items():
            prop = {k: v for k, v in prop.items() if k not in ("title", "description")}
            params.append({"name": name, "in": "query", "required": name in required, "schema": prop})
    responses: dict[str, Any] = {ok[0]: {"description": summary, **_json(ok[1])}}
    for code in ["400", "401", "429", "503", *errors]:
        responses[code] = {"description": _ERRORS[code], **_json(m.ErrorBody)}
    op: dict[str, Any] = {"summary": summary, "parameters": params, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
        for code in ("400", "411", "413", "415", "422"):
            responses.setdefault(code, {"description": _ERRORS[code], **_json(m.ErrorBody)})
    return op


@functools.cache
def document() -> dict[str, Any]:
    _, defs = models_json_schema(
        [(x, "validation") for x in _INPUTS] + [(x, "serialization") for x in _OUTPUTS], ref_template=_REF
    )
    paths = {
        "/api/v1/audit": {
            "get": _op(
                "The newest audit entries, oldest first (admin)",
                ("200", m.AuditList),
                ["403", "422"],
                query=m.AuditQuery,
            )
        },
        "/api/v1/approvals": {
            "get": _op(
                "Approvals, paged: pending oldest first (default), or by status newest first, each with can_decide",
                ("200", m.ApprovalList),
                ["403", "422"],
                query=m.ListQuery,
            )
        },
        "/api/v1/approvals/{id}": {
            "get": _op("One approval with its audit trail", ("200", m.ApprovalView), ["403", "404"], path=["id"])
        },
        "/api/v1/approvals/{id}/decisions": {
            "post": _op(
                "Decide, bound to the version and action hash you reviewed",
                ("200", m.ApprovalView),
                ["403", "404", "409"],
                body=m.DecisionRequest,
                path=["id"],
            )
        },
        "/api/v1/approvals/{id}/wait": {
            "get": _op(
                "Long-poll until the approval's version passes after_version (or the timeout)",
                ("200", m.ApprovalView),
                ["403", "404", "422"],
                query=m.WaitQuery,
                path=["id"],
            )
        },
        "/api/v1/proposals": {
            "post": _op(
                "Propose a tool call: the policy's verdict and, when a person must decide, the approval",
                ("200", m.ProposalView),
                ["403", "409"],
                body=m.ProposalRequest,
            )
        },
        "/api/v1/executions/{key}/claim": {
            "post": _op(
                "Claim an approved call's one execution",
                ("200", m.ClaimView),
                ["403", "404", "409"],
                body=m.ClaimRequest,
                path=["key"],
            )
        },
        "/api/v1/executions/{key}/outcome": {
            "post": _op(
                "Report how a claimed execution went",
                ("200", m.ApprovalView),
                ["403", "404", "409"],
                body=m.OutcomeRequest,
                path=["key"],
            )
        },
        "/api/v1/runs": {
            "post": _op(
                "Start a workflow registered under api.workflows",
                ("201", m.RunView),
                ["403", "404", "409"],
                body=m.RunStartRequest,
            )
        },
        "/api/v1/runs/{id}": {
            "get": _op(
                "Where a run stands, with the approvals it waits on", ("200", m.RunView), ["403", "404"], path=["id"]
            )
        },
        "/api/v1/runs/{id}/resume": {
            "post": _op(
                "Resume a run (optionally with new variable values)",
                ("200", m.RunView),
                ["403", "404", "409"],
                body=m.ResumeRequest,
                path=["id"],
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "hitl",
            "version": "1",
            "description": "Human approval gates for agent actions. Every call needs 'Authorization: Bearer <token>'.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": defs["$defs"],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
