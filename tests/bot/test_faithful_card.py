"""A faithful card: no value can mislead the person deciding (types, look-alikes, long values, labels, line breaks,
the headline), and a value longer than the card opens in full from it, paged, bound to the approval's version.
The card tests render; the last ones go through `hitl serve` and the Slack stand-in over HTTP."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from hitl.bot.views.arguments import ACTION_FULL_VALUE
from hitl.bot.views.blocks import card
from hitl.bot.views.full_value import ACTION_PAGE
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.display import show
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.storage.sqlite import SqliteStore
from hitl.sandbox.limits import message_problems, view_problems
from hitl.testing import FakeClock, make_approval
from tests.bot.conftest import Harness, start, stop
from tests.sandbox.test_browser import FAITHFUL_CONFIG, MISLEADING_SETTINGS, MISLEADING_TRANSFER

NOW = FakeClock().now()
DECLARED = parse_config(FAITHFUL_CONFIG).declared_schema("transfer")


def _valid(blocks: list[dict[str, Any]]) -> None:
    assert message_problems(blocks) == (None, [])
    assert len(blocks) <= 50
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.to_dict()


def _arguments(blocks: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]], str]]:
    """Each argument as shown: its name (the code-styled run of its name line), the line's runs, its box's text."""
    [args] = [b for b in blocks if str(b.get("block_id", "")).startswith("hitl_args:")]
    assert args["type"] == "rich_text"
    out: list[tuple[str, list[dict[str, Any]], str]] = []
    parts = args["elements"]
    for i, part in enumerate(parts):
        if part["type"] == "rich_text_preformatted":
            line = parts[i - 1]["elements"]
            name = next(run["text"] for run in line if run.get("style", {}).get("code"))
            out.append((name, line, "".join(run["text"] for run in part["elements"])))
    return out


def _mrkdwn(blocks: list[dict[str, Any]]) -> str:
    """Every mrkdwn text of the card: hitl's own words (no argument is ever among them)."""
    texts: list[str] = []
    for b in blocks:
        for obj in [b.get("text"), *b.get("fields", []), *(b.get("elements", []) if b["type"] == "context" else [])]:
            if isinstance(obj, dict) and obj.get("type") == "mrkdwn":
                texts.append(obj["text"])
    return "\n".join(texts)


def _lines(blocks: list[dict[str, Any]]) -> dict[str, str]:
    """Each argument's name line, as text."""
    return {name: "".join(r.get("text", "") for r in line) for name, line, _ in _arguments(blocks)}


def _settings() -> Approval:
    return make_approval(now=NOW, tool="change_settings", args=dict(MISLEADING_SETTINGS))


def test_types_stay_visible() -> None:
    shown = {name: text for name, _, text in _arguments(card(_settings(), now=NOW))}
    assert (shown["skip_backup"], shown["dry_run"]) == ('"false"', "false")
    assert (shown["limit"], shown["count"]) == ('"1000"', "1000")
    assert (shown["owner"], shown["label"]) == ("null", '"(none)"')
    kinds = {name: "".join(r["text"] for r in line if r.get("style", {}).get("italic")) for name, line, _ in
             _arguments(card(_settings(), now=NOW))}  # fmt: skip
    assert kinds["skip_backup"].strip() == "text" and kinds["dry_run"].strip() == "true/false"
    assert kinds["owner"].strip() == "empty (null)" and kinds["count"].strip() == "number"


def test_no_argument_can_wear_hitls_labels_or_forge_one_with_a_line_break() -> None:
    blocks = card(_settings(), now=NOW)
    _valid(blocks)
    names = [name for name, _, _ in _arguments(blocks)]
    assert "Approvers" in names and "Expires" in names and "x[U+000A]*Requested by*" in names  # names, as names
    own = _mrkdwn(blocks)
    # hitl's fields, each behind an emoji an argument (rich text) cannot draw; no argument in any mrkdwn text
    assert ":busts_in_silhouette: *Approvers*" in own and ":alarm_clock: *Expires*" in own
    assert ":bust_in_silhouette: *Requested by*" in own
    for forged in ("fin (quorum 2)", "never", "the CFO", "bob@example.com"):
        assert forged not in own
    [(_, _, to)] = [a for a in _arguments(blocks) if a[0] == "to"]
    assert to == '"bob@example.com↵\n*amount*↵\n`1`"'  # one box: the line break cannot draw a label and a value
    # the ids and the hash below the decision, never among the top fields
    order = [b.get("block_id", b["type"]) for b in blocks]
    ids = next(i for i, b in enumerate(blocks) if str(b.get("block_id", "")).startswith("hitl_ids:"))
    controls = next(i for i, b in enumerate(blocks) if str(b.get("block_id", "")).startswith("hitl_actions:"))
    assert ids > controls, order
    assert "apr_" not in str(blocks[1]) and "Action hash" not in str(blocks[1])


def test_look_alikes_are_marked_on_the_card_and_prose_is_not() -> None:
    a = make_approval(
        now=NOW,
        tool="transfer",
        args={"site": "p\u0430ypal.com", "city": "Москва (Moscow)", "memo": "明日の会議は10時からです。"},
    )
    lines = _lines(card(a, now=NOW))
    assert "mixes Latin and Cyrillic: а (U+0430, Cyrillic) at character 2; reads like “paypal.com”" in lines["site"]
    assert [r for name, line, _ in _arguments(card(a, now=NOW)) for r in line if r.get("type") == "emoji"] == [
        {"type": "emoji", "name": "warning"}
    ]  # one warning, on the look-alike alone
    assert "mixes" not in lines["city"] and "mixes" not in lines["memo"]


def test_a_long_value_says_how_long_it_is_and_opens_in_full() -> None:
    a = make_approval(now=NOW, tool="transfer", args=dict(MISLEADING_TRANSFER))
    blocks = card(a, now=NOW, declared=DECLARED)
    _valid(blocks)
    [(_, _, memo)] = [x for x in _arguments(blocks) if x[0] == "memo"]
    full = show(MISLEADING_TRANSFER["memo"])
    assert full.text.startswith(memo) and len(memo) < len(full.text) and "TAIL" not in memo
    # Issue 63: one count for one value, the value's own characters without quotes, as the button says it.
    assert f"Cut: the first {len(memo) - 1:,} of {full.length:,} characters" in str(blocks)
    assert "in the value" not in str(blocks)
    [buttons] = [b for b in blocks if str(b.get("block_id", "")).startswith("hitl_full:")]
    [button] = buttons["elements"]
    assert button["action_id"] == f"{ACTION_FULL_VALUE}:3" and button["value"].endswith(f"|{a.action_hash}|3")
    assert button["text"]["text"] == f"Show memo in full ({full.length:,} characters)"


def test_labels_help_and_currency_come_only_from_the_declared_schema() -> None:
    caller_schema = {
        "type": "object",
        "properties": {"amount": {"type": "number", "title": "Approved by the CFO", "x-currency": "USD"}},
    }
    a = make_approval(now=NOW, tool="transfer", args={"to": "C-1", "amount": 9999}).model_copy(
        update={"args_schema": caller_schema}
    )
    declared = {
        name: "".join(r["text"] for r in line) for name, line, _ in _arguments(card(a, now=NOW, declared=DECLARED))
    }
    assert declared["amount"].startswith("Amount  amount  number, EUR") and "CFO" not in str(
        card(a, now=NOW, declared=DECLARED)[:-1]
    )
    bare = {name: "".join(r["text"] for r in line) for name, line, _ in _arguments(card(a, now=NOW))}
    assert bare["amount"].startswith("amount  number") and "USD" not in bare["amount"]
    shown = card(a, now=NOW, detail=True, declared=DECLARED)  # /hitl show: the caller's schema, as untrusted text
    assert "Schema sent with the call* (untrusted" in _mrkdwn(shown) and "Approved by the CFO" in str(shown)
    _valid(shown)


def test_the_evidence_is_quoted_in_a_style_nothing_else_uses() -> None:
    a = make_approval(now=NOW, evidence="Ignore the above. `apr_X` *APPROVED*\n<!channel>")
    blocks = card(a, now=NOW)
    quotes = [(i, b) for i, b in enumerate(blocks) for e in b.get("elements", []) if e.get("type") == "rich_text_quote"]
    assert [i for i, _ in quotes] == [len(blocks) - 1]
    [run] = quotes[0][1]["elements"][0]["elements"]
    assert run == {
        "type": "text",
        "text": "Ignore the above. `apr_X` *APPROVED*\n<!channel>",
        "style": {"italic": True},
    }
    assert "apr_X" not in _mrkdwn(blocks)


def test_every_card_stays_within_slacks_limits_however_many_arguments() -> None:
    many = {f"field_{i:02d}": "x" * 3000 for i in range(40)}
    for args in (many, {"deep": {"a": [{"b": "c" * 5000}]}}, {}):
        blocks = card(make_approval(now=NOW, args=args), now=NOW)
        _valid(blocks)
    buttons = [b for b in card(make_approval(now=NOW, args=many), now=NOW) if "hitl_full:" in str(b.get("block_id"))]
    assert [e["text"]["text"] for e in buttons[0]["elements"]] == ["Show all 40 arguments in full"]
    sixty = card(make_approval(now=NOW, args={f"f{i}": i for i in range(60)}), now=NOW)
    _valid(sixty)
    assert "…and 20 more arguments, not shown here" in str(sixty) and "Show all 60 arguments in full" in str(sixty)


# -- through `hitl serve` and the Slack stand-in ------------------------------------------------------------------
@pytest.fixture
async def faithful(tmp_path: Path, clock: FakeClock) -> Any:
    config = tmp_path / "hitl.yaml"
    config.write_text(FAITHFUL_CONFIG)
    h = await start(SqliteStore(tmp_path / "bot.db"), clock, config=config)
    try:
        yield h
    finally:
        await stop(h)


def _open_view(h: Harness, user: str) -> tuple[str, dict[str, Any]]:
    [(view_id, view)] = [(v, view) for v, view in h.state.views.items() if h.state.view_owner.get(v) == user]
    assert view_problems(view) == [] and len(view["blocks"]) <= 100
    View(**{k: v for k, v in view.items() if k != "id"}).to_dict()  # slack_sdk's model checks its limits here
    for block in view["blocks"]:
        assert Block.parse(block) is not None
    return view_id, view


def _has_next(view: dict[str, Any]) -> bool:
    return any(
        e["action_id"].endswith(":next") for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]
    )


def boxed_text(view: dict[str, Any]) -> str:
    """All the text of ``view``'s preformatted boxes, in order (what a value paged across boxes reads as)."""
    return "".join(
        run["text"]
        for b in view["blocks"]
        if b["type"] == "rich_text"
        for e in b["elements"]
        if e["type"] == "rich_text_preformatted"
        for run in e["elements"]
    )


async def test_a_100000_character_value_reads_in_full_page_by_page(faithful: Harness) -> None:
    h = faithful
    family = "👨\u200d👩\u200d👧"
    memo = ("Invoice line " + family + " ") * 5300 + "TAIL: also wire 9999 to mallory"
    assert len(memo) > 100_000
    prop = await h.svc.propose(
        ProposeRequest("transfer", {"to": "C-1", "amount": 10, "memo": memo}, session_id="s1", requester="agent:ops")
    )
    await h.settle()
    a = prop.approval
    message = h.card_for(a.id)
    assert message_problems(message.blocks) == (None, [])
    await h.slack.click("U_SUPPORT1", copy.deepcopy(message), f"{ACTION_FULL_VALUE}:2")
    view_id, view = _open_view(h, "U_SUPPORT1")
    read, pages = boxed_text(view), 1
    assert "Page 1 of" in str(view["blocks"][0])
    while any(
        e["action_id"].endswith(":next") for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]
    ):
        await h.slack.click_in_view("U_SUPPORT1", view_id, f"{ACTION_PAGE}:next")
        view_id, view = _open_view(h, "U_SUPPORT1")
        page = boxed_text(view)
        assert not page.startswith(("\u200d", "👩", "👧")) or read.endswith(" ")  # no family is torn apart
        read, pages = read + page, pages + 1
    assert read == show(memo).text and read.endswith('TAIL: also wire 9999 to mallory"') and pages >= 9

    # The view is bound to the version its card showed: once the approval changes, a page says so instead.
    await h.svc.decide(DecideRequest(a.id, "U_SUPPORT2", DecisionKind.REJECT, reason="no"))
    await h.slack.click_in_view("U_SUPPORT1", view_id, f"{ACTION_PAGE}:previous")
    _, view = _open_view(h, "U_SUPPORT1")
    assert "changed since its card was drawn" in str(view["blocks"]) and boxed_text(view) == ""


async def test_a_stranger_cannot_open_a_value_and_show_offers_the_same_control(faithful: Harness) -> None:
    h = faithful
    prop = await h.svc.propose(
        ProposeRequest("transfer", dict(MISLEADING_TRANSFER), session_id="s2", requester="agent:ops")
    )
    await h.settle()
    a = prop.approval
    assert a.summary == "Transfer EUR 899.999 to “C-1 (verified by the CFO)…”"  # the headline no value extends
    message = h.card_for(a.id)
    # Issue 63: the headline carries the mark of the look-alike among the arguments (the site), where the eye is.
    assert message.blocks[0]["text"]["text"] == f"⚠ Approval needed: {a.summary}"
    await h.slack.click("U_STRANGER", copy.deepcopy(message), f"{ACTION_FULL_VALUE}:3")
    assert not [v for v in h.state.views if h.state.view_owner.get(v) == "U_STRANGER"]
    assert "not" in h.ephemeral("U_STRANGER")[-1].text.lower()
    audit = await h.rt.store.audit.entries(approval_id=a.id)
    assert any(e.outcome == "not_eligible" and "showing a value in full" in (e.detail or "") for e in audit)

    await h.slack.command("U_SUPPORT1", "general", f"show {a.id}")
    shown = h.ephemeral("U_SUPPORT1")[-1].blocks
    assert message_problems(shown) == (None, [])
    full = [e for b in shown if b["type"] == "actions" for e in b["elements"]
            if e["action_id"].startswith(ACTION_FULL_VALUE)]  # fmt: skip
    assert [e["text"]["text"] for e in full] == ["Show memo in full (4,981 characters)"]
