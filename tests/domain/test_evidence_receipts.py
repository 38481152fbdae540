"""An evidence record names every receipt handed out for its approval, and none that its claim recorded but that
could not be signed (audited ``receipt_unsigned``: never handed out, nothing ran under it)."""

from __future__ import annotations

from hitl.engine.domain.models import Status
from hitl.engine.receipts.claims import issued_entry, unsigned_entry
from hitl.engine.receipts.evidence import evidence_claims
from hitl.engine.testing.factories import make_approval


def test_a_receipt_never_handed_out_is_left_out_of_the_evidence() -> None:
    approval = make_approval(now=1000.0).model_copy(update={"status": Status.EXECUTED})
    trail = [
        issued_entry(approval, "rct_first", actor="w", now=1001.0),
        unsigned_entry(approval, "rct_first", actor="w", now=1001.0, why="no receipt could be signed: key gone"),
        issued_entry(approval, "rct_second", actor="w", now=1002.0),
    ]
    claims = evidence_claims(approval, trail, issuer="https://hitl.example.com", now=1003.0)
    assert claims["receipts"] == ["rct_second"]
    assert trail[1].outcome == "receipt_unavailable" and trail[1].detail.startswith("receipt rct_first ")
