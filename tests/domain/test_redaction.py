from __future__ import annotations

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
