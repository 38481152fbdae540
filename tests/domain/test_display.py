"""What a person is shown of a value: its type, every character, its length, and what could fool the eye (UTS #39),
without crying wolf at ordinary text in other scripts."""

from __future__ import annotations

import icu
import pytest

from hitl.engine.domain.display import (
    UNICODE_VERSION,
    ValueKind,
    excerpt,
    graphemes_cut,
    lookalikes,
    money,
    pages,
    reads_as,
    reveal,
    show,
)


def test_the_unicode_data_is_the_pinned_version() -> None:
    assert str(icu.UNICODE_VERSION) == UNICODE_VERSION == "16.0"


@pytest.mark.parametrize(
    ("value", "text", "kind"),
    [
        ("false", '"false"', ValueKind.STRING),
        (False, "false", ValueKind.BOOLEAN),
        ("1000", '"1000"', ValueKind.STRING),
        (1000, "1000", ValueKind.NUMBER),
        (None, "null", ValueKind.NULL),
        ("(none)", '"(none)"', ValueKind.STRING),
        (899.999, "899.999", ValueKind.NUMBER),
        (12345678901234567890, "12345678901234567890", ValueKind.NUMBER),
        ("", '""', ValueKind.STRING),
    ],
)
def test_types_stay_visible_and_nothing_is_rounded(value: object, text: str, kind: ValueKind) -> None:
    shown = show(value)
    assert (shown.text, shown.kind) == (text, kind)
    # Issue 63: text that reads as another type ("false", "1000") is marked; nothing else here is.
    assert bool(shown.warnings) == (value in ("false", "1000"))


@pytest.mark.parametrize(
    ("value", "mark", "warning"),
    [
        ("false", "text that reads as a true/false value", "text, not a true/false value: only its quotes tell it"),
        ("TRUE", "text that reads as a true/false value", "from TRUE"),
        ("null", "text that reads as null", "text, not null"),
        ("1000", "text that reads as a number", "text, not a number: only its quotes tell it from 1000"),
        (" -1,250.50 ", "text that reads as a number", "from -1,250.50"),
        ("1e21", "text that reads as a number", "text, not a number"),
        ("p\u0430ypal.com", "look-alike letters", "mixes Latin and Cyrillic"),
        ("pay\u200bpal", "hidden characters", "1 invisible"),
        ("bob\u202e", "hidden characters", "direction-changing"),
        ({"to": "p\u0430ypal.com"}, "look-alike letters", "to: “pаypal.com” mixes"),
    ],
)
def test_what_could_fool_the_eye_carries_a_short_mark(value: object, mark: str, warning: str) -> None:
    shown = show(value)
    assert shown.marks == (mark,) and any(warning in w for w in shown.warnings), shown


@pytest.mark.parametrize("value", ["C-1042", "order 1000", "1000 EUR", "falsey", "", "Москва (Moscow)", 1000, False])
def test_text_that_reads_as_text_carries_no_mark(value: object) -> None:
    assert show(value).marks == ()
    assert not isinstance(value, str) or reads_as(value) is None


@pytest.mark.parametrize("value", ["78291", "false", "null"])
def test_a_string_its_schema_declares_as_text_is_not_marked_as_another_type(value: str) -> None:
    # An order number declared `type: string` is text by contract; marking every one would cry wolf. Undeclared, or
    # declared as anything else, the same string is marked; look-alikes are marked whatever the schema says.
    assert show(value, declared={"type": "string", "maxLength": 32}).marks == ()
    for declared in (None, {}, {"type": ["string", "number"]}, {"maxLength": 32}):
        assert show(value, declared=declared).marks[0].startswith("text that reads as"), declared
    assert show("p\u0430ypal.com", declared={"type": "string"}).marks == ("look-alike letters",)


def test_a_cut_value_counts_its_own_characters_without_quotes() -> None:
    memo = "Invoice 2026-11 for services. " * 165
    text, shown_count = excerpt(memo, 1200)
    assert text == '"' + memo[:1199] and shown_count == 1199 and show(memo).length == len(memo) == 4950
    hidden = "a\u200b" * 1000  # each hidden character shows as 8: the count is still of the value's own
    text, shown_count = excerpt(hidden, 1200)
    assert len(text) <= 1200 and text == show(hidden[:shown_count]).text[:-1] and 0 < shown_count < 1200
    assert excerpt("short", 1200) == ('"short"', 5)


def test_nested_values_are_exact_json_with_every_string_checked() -> None:
    shown = show({"to": "p\u0430y", "n": [1, "x\u200d"], "ok": None})
    assert shown.kind is ValueKind.OBJECT
    assert '"n": [\n  1,\n  "x[U+200D]"\n ]' in shown.text and '"ok": null' in shown.text
    assert any(w.startswith("to: “pаy” mixes Latin and Cyrillic") for w in shown.warnings)
    assert any("invisible" in w for w in shown.warnings)


def test_hidden_and_control_characters_are_marked_where_they_were() -> None:
    raw = "pay\u200b to\u202e bob\x07 now\u00ad\ufeff"
    shown = show(raw)
    assert shown.text == '"pay[U+200B] to[U+202E] bob[U+0007] now[U+00AD][U+FEFF]"'
    assert shown.length == len(raw) and "5 invisible, control or direction-changing characters" in shown.warnings[0]
    assert reveal("a\tb\nc", keep="\n") == ("a[U+0009]b\nc", 1)


def test_a_line_break_stays_inside_the_value_and_is_marked() -> None:
    shown = show("bob@example.com\n*amount*\n`1`")
    assert shown.text == '"bob@example.com↵\n*amount*↵\n`1`"'
    assert "2 line breaks inside the text (shown as ↵)" in shown.warnings


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("p\u0430ypal.com", "“pаypal.com” mixes Latin and Cyrillic: а (U+0430, Cyrillic) at character 2; reads like "
         "“paypal.com”"),
        ("bob@ex\u0430mple.com", "mixes Latin and Cyrillic"),
        ("https://g\u043e\u043egle.com/login", "reads like “https://google.com/login”"),
        ("\u0430\u0440\u0440\u04cf\u0435.com", "mixes Latin and Cyrillic"),
        ("\u0430\u0440\u0440\u04cf\u0435", "all Cyrillic, but reads like the Latin"),
        ("Pay the invoice to p\u0430ypal today", "“pаypal” mixes Latin and Cyrillic"),
        ("\u03bf\u03c1en", "mixes Latin and Greek"),
    ],
)  # fmt: skip
def test_look_alikes_are_marked(text: str, found: str) -> None:
    warnings = lookalikes(text)
    assert warnings and found in warnings[0], warnings


@pytest.mark.parametrize(
    "text",
    [
        "Москва (Moscow)",
        "Москва",
        "明日の会議は10時からです。",
        "東京タワーへ行く",
        "中文注音ㄅㄆㄇ",
        "한국어 漢字 텍스트",
        "Ελληνικά κείμενο",
        "مرحبا بالعالم",
        "naïve café résumé",
        "user_42@example.com",
        "C-1042",
        "1,234.50 €",
        "emoji 👍🏽 and 👨‍👩‍👧",
    ],
)
def test_ordinary_text_in_any_script_is_not_flagged(text: str) -> None:
    assert lookalikes(text) == []
    assert show(text).warnings == ()


def test_cuts_and_pages_never_split_a_grapheme() -> None:
    family = "👨\u200d👩\u200d👧"
    text = ("ab" + family + "e\u0301" + "🇫🇷") * 50
    for size in range(1, 30):
        parts = pages(text, size)
        assert "".join(parts) == text
        for part in parts:
            assert not part.startswith(("\u200d", "\u0301")) and not part.endswith("\u200d")
            assert part.count("🇫") == part.count("🇷")  # a flag's two halves stay together
        head = graphemes_cut(text, size)
        assert text.startswith(head) and len(head) <= size and not head.endswith("\u200d")
    big = "x" * 100_000
    assert [len(p) for p in pages(big, 12_000)] == [12_000] * 8 + [4_000]


@pytest.mark.parametrize(
    ("value", "currency", "text"),
    [
        (899.999, None, "899.999"),
        (1000, None, "1,000.00"),
        (1234.5, "EUR", "EUR 1,234.50"),
        ("12.345", "USD", "USD 12.345"),
        (0.1, None, "0.10"),
        (12345678901234567890, None, "12,345,678,901,234,567,890.00"),
    ],
)
def test_money_is_exact_and_shows_its_currency(value: object, currency: str | None, text: str) -> None:
    assert money(value, currency) == text


def test_money_refuses_what_is_not_an_amount() -> None:
    for bad in (True, "abc", float("nan"), None):
        with pytest.raises(ValueError, match="amount"):
            money(bad)


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("pay\u200dpal", True),  # a joiner hidden in a Latin word
        ("a\ufe0fb", True),  # a variation selector on a Latin letter
        ("\u200bstart", True),
        ("می\u200cخواهم", False),  # Persian writes the non-joiner in ordinary words
        ("क्\u200dष", False),  # a Devanagari conjunct's joiner
        ("⚠\ufe0f warning", False),  # emoji presentation
        ("1\ufe0f\u20e3", False),  # a keycap
        ("🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", False),  # Scotland's flag
        ("hi\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065", True),  # tag characters spelling "ignore"
    ],
)
def test_invisible_characters_are_marked_unless_writing_uses_them(text: str, marked: bool) -> None:
    assert bool(reveal(text)[1]) is marked, reveal(text)


def test_a_grapheme_longer_than_any_written_text_is_cut_inside_so_its_start_still_shows() -> None:
    zalgo = "Z" + "\u0336\u0301\u0316\u0489" * 1000  # one grapheme of 4,001 code points
    assert graphemes_cut(zalgo, 600) == zalgo[:600]
    assert graphemes_cut("ok " + zalgo, 600) == ("ok " + zalgo)[:600]
    family = "👨\u200d👩\u200d👧"  # a grapheme text needs is still never split
    assert graphemes_cut(family * 3, 6) == family and graphemes_cut(family, 4) == ""
    parts = pages("ok " + zalgo + " end", 3000)  # the full-value view's boxes hold 3,000 characters each
    assert "".join(parts) == "ok " + zalgo + " end" and max(map(len, parts)) <= 3000
    assert pages(family * 3, 4) == [family] * 3
