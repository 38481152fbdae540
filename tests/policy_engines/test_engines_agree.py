"""A rule's outcome from a policy engine (issue 71): the same twenty calls get the same tiers, roles and quorums
under native rules, under Cedar (``cedarpy``, the Cedar engine's Rust core) and under Rego (the real OPA, served over
its HTTP Data API by :mod:`tests.policy_engines.opa_data_api`); an engine that is down, slow or unreadable makes
every call ask a person, and the card's "why" names the policy and rule ids only."""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hitl import ApprovalService, ProposeRequest, Tier, load_config
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.local_http import served
from tests.policy_engines.opa_data_api import opa_data_api

FIXTURES = Path(__file__).parent / "fixtures"

HEAD = """\
roles: {finance: [U_FIN1, U_FIN2, U_FIN3]}
policy:
  allowed_tools: [lookup]
"""

NATIVE = (
    HEAD
    + """\
  denied_tools: [wire]
  tools: {refund: {tier: notify}, delete_account: {tier: approve}}
  rules:
    - {name: big-refund, tools: [refund], when: "args.amount > 500", tier: approve, role: finance}
    - {name: huge-refund, tools: [refund], when: "args.amount > 5000", tier: escalate, role: finance, quorum: 2}
    - name: customer_day
      tools: [refund]
      rolling_sum: {subject: args.customer, value: args.amount, threshold: 1000, window: 1d}
      tier: approve
      role: finance
"""
)

EXTERNAL = (
    HEAD
    + """\
  tools: {refund: {tier: notify}, delete_account: {tier: approve}, wire: {tier: approve}}
  rules:
    # Keeps the customer's day of refunds for the engine (its threshold is never reached; the engine decides).
    - name: customer_day
      tools: [refund]
      rolling_sum: {subject: args.customer, value: args.amount, threshold: 1000000000, window: 1d}
      tier: notify
    - name: desk
      source: SOURCE
"""
)

CEDAR = "{cedar: {policies: [refunds.cedar], schema: refunds.cedarschema}}"

CALLS: list[tuple[str, dict[str, object]]] = [
    ("lookup", {"query": "order 1"}),
    ("refund", {"amount": 100, "customer": "c1"}),
    ("refund", {"amount": 600, "customer": "c1"}),
    ("refund", {"amount": 6000, "customer": "c1"}),
    ("refund", {"amount": 400, "customer": "c2"}),
    ("refund", {"amount": 400, "customer": "c2"}),
    ("refund", {"amount": 400, "customer": "c2"}),
    ("delete_account", {"customer": "c3"}),
    ("wire", {"amount": 10, "to": "acct-1"}),
    ("lookup", {"query": "order 2"}),
    ("refund", {"amount": 50, "customer": "c4"}),
    ("refund", {"amount": 500, "customer": "c4"}),
    ("refund", {"amount": 501, "customer": "c5"}),
    ("refund", {"amount": 5000, "customer": "c6"}),
    ("refund", {"amount": 5001, "customer": "c7"}),
    ("wire", {"amount": 99999, "to": "acct-2"}),
    ("delete_account", {"customer": "c1"}),
    ("refund", {"amount": 300, "customer": "c4"}),
    ("refund", {"amount": 200, "customer": "c4"}),
    ("lookup", {"query": "refunds of c4"}),
]

EXPECTED = [
    ("auto", False, None, 1),
    ("notify", False, None, 1),
    ("approve", False, "finance", 1),
    ("escalate", False, "finance", 2),
    ("notify", False, None, 1),
    ("notify", False, None, 1),
    ("approve", False, "finance", 1),  # 1200 within the day
    ("approve", False, None, 1),
    ("escalate", True, None, 1),
    ("auto", False, None, 1),
    ("notify", False, None, 1),
    ("notify", False, None, 1),  # 550: not over 500 alone nor 1000 together
    ("approve", False, "finance", 1),
    ("approve", False, "finance", 1),
    ("escalate", False, "finance", 2),
    ("escalate", True, None, 1),
    ("approve", False, None, 1),
    ("notify", False, None, 1),  # 850
    ("approve", False, "finance", 1),  # 1050
    ("auto", False, None, 1),
]


def _opa(url: str, *, path: str = "hitl/refunds/decision", timeout: float = 5) -> str:
    """An ``opa:`` source in hitl.yaml's flow style."""
    return f"{{opa: {{url: '{url}', path: {path}, timeout: {timeout:g}}}}}"


def _config(tmp_path: Path, text: str) -> Path:
    for name in ("refunds.cedar", "refunds.cedarschema"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    path = tmp_path / "hitl.yaml"
    path.write_text(text)
    return path


async def _outcomes(path: Path, tmp_path: Path) -> list[tuple[str, bool, str | None, int]]:
    """Each call proposed in turn to a service on a real store, as `hitl serve` builds it from ``path``."""
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        service = ApprovalService.from_config(load_config(path), store=store, clock=FakeClock(), config_path=str(path))
        out = []
        for i, (tool, args) in enumerate(CALLS):
            got = await service.propose(ProposeRequest(tool=tool, args=args, session_id=f"s{i}", requester="agent"))
            v = got.verdict
            out.append((str(v.tier), v.denied, v.required_role, v.quorum))
            # Asking for a person means an approval is waiting, never a run.
            assert got.may_run is (not v.denied and not Tier(v.tier).needs_human), (tool, args)
        return out
    finally:
        await store.close()


async def test_twenty_calls_get_the_same_tiers_under_native_rules_cedar_and_rego(tmp_path: Path) -> None:
    native = await _outcomes(_config(_mk(tmp_path / "native"), NATIVE), tmp_path / "native")
    assert native == EXPECTED
    cedar = await _outcomes(_config(_mk(tmp_path / "cedar"), EXTERNAL.replace("SOURCE", CEDAR)), tmp_path / "cedar")
    assert cedar == EXPECTED
    with opa_data_api(FIXTURES / "refunds.rego") as url:
        rego = await _outcomes(
            _config(_mk(tmp_path / "rego"), EXTERNAL.replace("SOURCE", _opa(url))), tmp_path / "rego"
        )
    assert rego == EXPECTED


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _redirecting() -> Iterator[str]:
    """A server on 127.0.0.1 that answers every POST with a redirect to a page saying allow: what OPA's Data API
    never does, and what a hijacked or misconfigured address could."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", "/allow")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            body = json.dumps({"result": {"allow": True}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with served(Handler) as url:
        yield url


@pytest.mark.parametrize("failure", ["down", "slow", "unreadable-cedar", "undefined-document", "redirected"])
async def test_an_engine_that_cannot_answer_makes_every_call_ask_a_person(tmp_path: Path, failure: str) -> None:
    """Down (nothing listens), slow (never answers within its timeout), Cedar policies that do not parse, a Rego
    path with no document: every one of the twenty calls asks a person (none runs, none is denied), at least
    approve, and the card says which policy could not be checked, never its rules."""
    with opa_data_api(FIXTURES / "refunds.rego", slow=failure == "slow") as url, _redirecting() as elsewhere:
        if failure == "redirected":
            source = _opa(elsewhere)
        elif failure == "down":
            source = _opa(f"http://127.0.0.1:{_closed_port()}", timeout=1)
        elif failure == "slow":
            source = _opa(url, timeout=0.2)
        elif failure == "undefined-document":
            source = _opa(url, path="hitl/refunds/nothing_here")
        else:
            source = CEDAR
        path = _config(tmp_path, EXTERNAL.replace("SOURCE", source))
        if failure == "unreadable-cedar":
            (tmp_path / "refunds.cedar").write_text("permit (principal, action")
        store = SqliteStore(tmp_path / "hitl.db")
        try:
            service = ApprovalService.from_config(
                load_config(path), store=store, clock=FakeClock(), config_path=str(path)
            )
            for i, (tool, args) in enumerate(CALLS):
                got = await service.propose(ProposeRequest(tool=tool, args=args, session_id=f"s{i}"))
                v = got.verdict
                assert v.tier.needs_human and not v.denied and not got.may_run, (failure, tool, args, v)
                assert got.approval is not None
                why = " ".join(got.approval.why)  # what the card says, as stored on the approval
                assert "desk" in why and "could not be checked" in why, why
                assert "5000" not in why and "amount" not in why and "forbid" not in why, why
        finally:
            await store.close()
