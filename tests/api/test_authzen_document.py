"""The AuthZEN endpoints keep to an OpenAPI document generated from their route table, as ``/api/v1``'s do:
schemathesis fuzzes both evaluation operations over real HTTP against ``hitl serve`` (no 5xx, no undocumented
status, every answer matching its schema)."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate
from schemathesis.specs.openapi.checks import positive_data_acceptance

from hitl.api.authzen import openapi
from tests.api.conftest import TOKENS
from tests.api.test_openapi import served

DOCUMENT = openapi()
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)

__all__ = ["served"]  # the module's served hitl serve, shared with the /api/v1 fuzz test's fixture


def test_the_document_is_valid_openapi_and_names_both_operations() -> None:
    validate(DOCUMENT)
    assert set(DOCUMENT["paths"]) == {"/access/v1/evaluation", "/access/v1/evaluations"}


@SCHEMA.parametrize()
# Fixed examples (derandomize), as the /api/v1 fuzz test has them, so each run meets the same cases.
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_authzen_endpoints_keep_to_their_document(case: Any, served: str) -> None:
    # A schema-valid subject is still refused when it is not the token's (403): the schema cannot say whose it is.
    if "Authorization" in (case.headers or {}):
        case.headers["Authorization"] = f"Bearer {TOKENS['admin'][0]}"
    case.call_and_validate(base_url=served, excluded_checks=[positive_data_acceptance])
