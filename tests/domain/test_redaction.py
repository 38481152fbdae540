from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hitl.engine.domain.redaction import Redactor, bounded, luhn_valid


def test_redacts_email_phone_and_luhn_valid_cards_only() -> None:
    r = Redactor()
    text = (
        "mail jane.doe+x@example.co.uk, call +1 (415) 555-0100 or 030 1234 5678, card 4111-1111-1111-1111, "
        "order 78291, amount 899.00, not a card 4111 1111 1111 1112"
    )
    out = r.redact(text)
    assert "[email]" in out and "jane" not in out
    assert out.count("[phone]") == 2
    assert "[card]" in out and "4111-1111-1111-1111" not in out
    assert "order 78291" in out and "899.00" in out
    assert "4111 1111 1111 1112" in out  # fails Luhn: kept


def test_configured_patterns() -> None:
    r = Redactor.with_patterns([("iban", r"\bDE\d{20}\b")])
    assert r.redact("pay DE89370400440532013000 now") == "pay [iban] now"


def test_luhn() -> None:
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713") and not luhn_valid("79927398710")


def test_bounded_never_splits_graphemes() -> None:
    family = "👨\u200d👩\u200d👧\u200d👦"
    flag = "🇩🇪"
    skin = "👍🏽"
    accented = "e\u0301"
    for unit in (family, flag, skin, accented):
        text = unit * 30
        for limit in range(1, 40):
            out = bounded(text, limit)
            assert len(out) <= limit
            body = out.removesuffix("…")
            assert body == unit * (len(body) // len(unit)), (unit, limit, out)
    assert bounded("short", 10) == "short"
    assert bounded("x" * 50, 10) == "x" * 9 + "…"


@given(st.text(max_size=200), st.integers(min_value=1, max_value=250))
def test_bounded_respects_limit(text: str, limit: int) -> None:
    out = bounded(text, limit)
    assert len(out) <= limit
    assert out == text or out.endswith("…")


def cpu_seconds(work: Callable[[], object], runs: int = 3) -> float:
    """The least CPU time of ``runs`` runs of ``work``: the run the busy machine disturbed least."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("unit", ["a", "order.78291_x-y+z%"], ids=["one-run", "address-characters"])
def test_redaction_reads_text_in_linear_time(unit: str) -> None:
    """20 times the text costs about 20 times the CPU (the address pattern was quadratic without an `@`: 400 times)."""
    r = Redactor()
    small, large = (unit * (n // len(unit) + 1) for n in (50_000, 1_000_000))
    assert r.redact(large) == large
    ratio = cpu_seconds(lambda: r.redact(large)) / max(cpu_seconds(lambda: r.redact(small)), 1e-6)
    assert ratio < 40, ratio


def test_bounded_redaction_cuts_before_the_patterns_and_shows_nothing_in_part() -> None:
    """Only the kept characters are read (a pattern needing more finds nothing), and what a pattern masks running
    across the cut is left out whole rather than shown in part."""
    r = Redactor.with_patterns([("acct", r"ACCT-\d{8}"), ("tail", r"X{3000}")])
    out = r.redact_bounded("X" * 5000, 2000)
    assert out == "X" * 1999 + "…"  # the kept 1,999 never made the 3,000 the pattern needs
    for item in ("john.doe@example.com", "4111 1111 1111 1111", "+1 (415) 555-0100", "ACCT-12345678"):
        out = r.redact_bounded("y" * 1990 + f" {item} and on", 2000)  # the cut falls inside the item
        assert out == "y" * 1990 + " …", out
    assert r.redact_bounded("a@b.cc ACCT-12345678 " + "z" * 3000, 2000).startswith("[email] [acct] zzz")
