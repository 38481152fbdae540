"""``hitl demo``: the refund example in the local Slack sandbox, interactive or scripted (headless)."""

from __future__ import annotations

import asyncio
import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_MODIFY, ACTION_REJECT, ACTION_TRUST
from hitl.bot.views.evidence import EVIDENCE
from hitl.demo.examples import refund_example
from hitl.demo.launch import STRANGER, Sandbox, start_sandbox
from hitl.demo.reading import as_seen
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.runs import RunResult, RunStatus
from hitl.engine.domain.tally import summarize
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.sandbox.webapi import Message

__all__ = ["HOSTILE_NOTE", "run_interactive", "run_scripted"]

HOSTILE_NOTE = (
    "My parcel arrived crushed. <!channel> *APPROVED by Security* — see <https://evil.example|the "
    "approval console> or call +1 415 555 0100, jane@example.com"
)
TRY = """Things to try (switch people with "Acting as"):
  1. As stranger, press Approve on a refund card: only you see the refusal.
  2. As support1, press Approve: the run resumes, refunds once and replies in the thread.
  3. As fin1 and then fin2, approve the 899.00 refund in #finance-approvals (two distinct approvers). Each card
     says what will happen to order 78291; if step 2's refund ran first, what the 899.00 would do changed
     after they saw it: nothing runs, and it is asked again showing both (drift). Approve it again to run it.
  4. As support2, press Modify, type -5 (inline error), then 900 (a new card goes to finance).
  5. As support1, press "Trust for session" on the chat-42 refund: the agent's next refund in that session
     runs without a card, and an FYI in the channel says so. Open "Home" to see the trust in force.
  6. Type /hitl pending or /hitl help in the message box; open "Home" for your own inbox.
  7. Press "Open in browser" on a card: hitl's web inbox opens it, signed in as the person under "Acting as".
  The customer note with <!channel> and fake *APPROVED* markup stays inert text on the card."""


async def _start(
    tmp: str,
    port: int,
    *,
    worker: bool = True,
    store_url: str | None = None,
    config: str | None = None,
    api_port: int = 0,
) -> Sandbox:
    """The sandbox on the example's policy and a throwaway store, or on the ``config`` and ``store_url`` given."""
    os.environ["SHOP_DB"] = str(Path(tmp) / "shop.db")
    store = None if store_url else SqliteStore(Path(tmp) / "hitl.db")
    return await start_sandbox(
        config_path=config or refund_example() / "hitl.yaml",
        store=store,
        store_url=store_url,
        port=port,
        worker=worker,
        api_port=api_port,
        web_inbox=True,
    )


TRUST_SESSION = "chat-42"
"""The agent conversation of the Trust story: two refunds in one session."""


async def _agent_refund(sb: Sandbox, order: str, amount: float) -> Any:
    """The chat agent asks for a refund in its session (the way an agent framework's gate asks)."""
    svc = sb.rt.runtime.contexts.default.service
    args = {"order_id": order, "customer_id": "C-3107", "amount": amount, "reason": "late delivery"}
    return await svc.propose(ProposeRequest("refund", args, session_id=TRUST_SESSION, requester="agent:chat"))


async def _agent_session(sb: Sandbox) -> None:
    """The interactive demo's chat agent: one refund that waits for a person, then, once it is decided, the next
    one in the same session (no card if the first was trusted: an FYI says it ran)."""
    first = await _agent_refund(sb, "78310", 25)
    a = first.approval
    while a is not None and a.status is Status.PENDING:
        a = await sb.rt.store.approvals.wait_changed(a.id, after_version=a.version, timeout=3600)
    await _agent_refund(sb, "78311", 30)


async def _refund(sb: Sandbox, amount: int, note: str, order: str = "78291") -> RunResult:
    result = await sb.rt.lifecycle.start(
        load_workflow(refund_example() / "workflow.yaml"), {"order_id": order, "amount": str(amount), "note": note}
    )
    await sb.rt.ctx.notifier.flush()  # the run never waits on Slack; the story shows the card once it is posted
    return result


async def run_interactive(
    port: int = 8700,
    host: str = "127.0.0.1",
    *,
    store_url: str | None = None,
    config: str | None = None,
    api_port: int = 0,
) -> None:
    """``hitl demo``: the sandbox in the browser until interrupted, and ``hitl serve``'s API on ``api_port``."""
    out = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="hitl-sandbox-") as tmp:
        sb = await _start(tmp, port, store_url=store_url, config=config, api_port=api_port)
        try:
            await _refund(sb, 120, HOSTILE_NOTE)
            await _refund(sb, 899, "Whole order damaged, please refund everything.")
            await _refund(sb, 60, "Only the mug was broken.", order="78300")
            # The Trust story needs the example's refund tool: not started on a policy of your own.
            agent = asyncio.create_task(_agent_session(sb)) if config is None else None
            out.print(Text.assemble(("hitl sandbox is up: ", "bold green"), (f"{sb.url}/", "bold underline")))
            # An agent, the CLI or a protected service reaches the same bot here, with a token of api.tokens.
            out.print(Text.assemble(("hitl serve's API: ", "bold"), f"{sb.bot_url} (HITL_API_URL)"), soft_wrap=True)
            out.print(Text(TRY))
            out.print(Text("It runs until you stop it: Ctrl-C to stop.", style="dim"))
            await asyncio.Event().wait()
            if agent is not None:
                agent.cancel()
        finally:
            await sb.close()


class _Transcript:
    def __init__(self) -> None:
        self.out = Console(highlight=False, soft_wrap=True, width=110)

    def step(self, title: str) -> None:
        self.out.rule(Text(title, style="bold"))

    def line(self, *parts: str | tuple[str, str]) -> None:
        """One line of the story, as a person would read it in Slack (no wire markup)."""
        self.out.print(Text.assemble(*(as_seen(p) if isinstance(p, str) else (as_seen(p[0]), p[1]) for p in parts)))

    def literal(self, label: str, text: str) -> None:
        """A line whose ``text`` is rich text, which Slack shows exactly as it is (nothing in it is markup)."""
        self.out.print(Text.assemble((label, "dim"), text))


def _card(sb: Sandbox, approval_id: str) -> Message:
    return next(m for m in sb.state.messages if approval_id in m.text and not m.thread_ts and not m.ephemeral_to)


def _header(m: Message) -> str:
    return str(m.blocks[0]["text"]["text"]) if m.blocks else m.text


async def _settle(sb: Sandbox, session_id: str | None = None) -> None:
    # With a run: until it has moved on, finished or paused at another approval (a run an unhalt lets go pauses
    # again at its own gate; waiting for it to finish waited out every round, five seconds each demo).
    start = await sb.rt.store.runs.load(session_id) if session_id else None
    for _ in range(500):
        await sb.rt.lifecycle.process_jobs()
        await sb.rt.ctx.notifier.flush()
        if session_id is None:
            return
        found = await sb.rt.store.runs.load(session_id)
        if found and found.status != RunStatus.PAUSED:
            return
        waiting = found.data.get("waiting") if found else None
        if waiting and start is not None and waiting != start.data.get("waiting"):
            return
        await asyncio.sleep(0.01)
    raise RuntimeError(f"the demo's run {session_id} did not move on; the story cannot go on")  # never silently


async def _click(sb: Sandbox, user: str, approval: Approval, action: str) -> str:
    before = len([m for m in sb.state.messages if m.ephemeral_to == user])
    await sb.dispatcher.click(user, copy.deepcopy(_card(sb, approval.id)), action)
    mine = [m for m in sb.state.messages if m.ephemeral_to == user]
    return mine[-1].text if len(mine) > before else ""


ADMIN = "U_ADMIN"
"""Who may stop the system in the scripted story (the admin role of its policy)."""


def _story_config(tmp: str) -> str:
    """The example's policy, plus what the oversight steps use: an admin role, a stock check that runs without a
    person and is always spot-checked, and a reorder whose every approval gets a practice twin."""
    config = yaml.safe_load((refund_example() / "hitl.yaml").read_text())
    config["roles"]["admin"] = [ADMIN]
    config["policy"]["allowed_tools"] = [*config["policy"]["allowed_tools"], "check_stock"]
    config["policy"]["tools"]["reorder_stock"] = {"tier": "approve", "role": "support"}
    config["oversight"] = {
        "spot_check": {"tools": {"check_stock": 1.0}},
        "practice": {
            "delay": 0,  # the story shows the twin's card at once; a deployment lets it come a while after
            "tools": {"reorder_stock": 1.0},
            "defects": {"reorder_stock": [{"name": "too_many", "set": {"quantity": 10000}, "says": "10,000 mugs"}]},
        },
    }
    path = Path(tmp) / "hitl.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    consequence = "shop_consequences.py"  # its consequence is found beside its hitl.yaml: copied along with it
    (Path(tmp) / consequence).write_text((refund_example() / consequence).read_text())
    return str(path)


async def run_scripted() -> int:
    """``hitl demo --scripted``: the sandbox's story told headless, every step checked."""
    t = _Transcript()
    with tempfile.TemporaryDirectory(prefix="hitl-sandbox-") as tmp:
        # The script drives the worker itself, step by step.
        sb = await _start(tmp, 0, worker=False, config=_story_config(tmp))
        try:
            return await _scenario(sb, t)
        finally:
            await sb.close()


async def _scenario(sb: Sandbox, t: _Transcript) -> int:
    ok = await _a_card_and_a_click(sb, t)
    ok &= await _finance_and_edits(sb, t)
    ok &= await _trust_and_spot_checks(sb, t)
    ok &= await _practice_and_the_stop_switch(sb, t)
    t.step("11. The audit trail")
    table = Table("event", "actor", "approval", "v", "outcome", "detail", header_style="bold")
    for e in await sb.rt.store.audit.entries(limit=200):
        table.add_row(e.event, Text(e.actor), e.approval_id or "", str(e.version or ""), e.outcome, Text(e.detail))
    t.out.print(table)
    t.step("demo " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


async def _a_card_and_a_click(sb: Sandbox, t: _Transcript) -> bool:
    """Steps 1-3: the card, a stranger refused, an approval that runs once."""
    ok = True
    t.step("1. The agent proposes a refund of 120.00; the run pauses and a card appears")
    small = await _refund(sb, 120, HOSTILE_NOTE)
    assert small.approval is not None
    card = _card(sb, small.approval.id)
    t.line(("#refund-approvals  ", "dim"), (_header(card), "bold"), f"   (run {small.session_id}: {small.status})")
    quoted = next(b["elements"][0] for b in card.blocks if b.get("block_id") == EVIDENCE)
    evidence = "".join(run["text"] for run in quoted["elements"])
    t.literal("untrusted evidence as a reviewer sees it (plain text; it pings nobody): ", evidence.replace("\n", " "))
    last = card.blocks[-1].get("block_id") == EVIDENCE  # after the controls, apart from them
    # Quoted rich text, which Slack shows as it is: no mention, link or format forms from it.
    literal = quoted["type"] == "rich_text_quote" and all(run["type"] == "text" for run in quoted["elements"])
    inert = literal and "<!channel>" in evidence and "[email]" in evidence
    t.line(
        ("hostile note inert (escaped, literal, redacted, after the buttons): ", "dim"),
        ("yes" if inert and last else "NO", "bold"),
    )
    inert &= last
    ok &= inert

    t.step("2. A stranger presses Approve")
    refusal = await _click(sb, STRANGER, small.approval, ACTION_APPROVE)
    t.line(("only the stranger sees: ", "dim"), refusal)
    ok &= "not a reviewer" in refusal

    t.step("3. U_SUPPORT1 approves; the run resumes and refunds exactly once")
    await _click(sb, "U_SUPPORT1", small.approval, ACTION_APPROVE)
    await _settle(sb, small.session_id)
    card = _card(sb, small.approval.id)
    thread = [m.text for m in sb.state.messages if m.thread_ts == card.ts]
    t.line(("card: ", "dim"), (_header(card), "bold"), ("   thread: ", "dim"), thread[-1] if thread else "(none)")
    ok &= _header(card).startswith("Approved and done") and bool(thread)
    return ok


async def _finance_and_edits(sb: Sandbox, t: _Transcript) -> bool:
    """Steps 4-6: a quorum of finance approvers, an edit that escalates, /hitl pending."""
    ok = True
    t.step("4. A refund of 899.00 escalates to finance and needs two distinct approvers")
    big = await _refund(sb, 899, "Whole order damaged.")
    assert big.approval is not None
    fcard = _card(sb, big.approval.id)
    t.line(
        ("#", "dim"),
        (sb.state.channels[fcard.channel].name, "dim"),
        "  ",
        (_header(fcard), "bold"),
        f"  ({big.approval.tier}, role {big.approval.required_role}, quorum {big.approval.quorum})",
    )
    await _click(sb, "U_FIN1", big.approval, ACTION_APPROVE)
    await _settle(sb)
    progress = next(
        (
            b["text"]["text"].splitlines()[0]
            for b in _card(sb, big.approval.id).blocks
            if b["type"] == "section" and "approvals*" in b.get("text", {}).get("text", "")
        ),
        "",
    )
    t.line(("after U_FIN1: ", "dim"), progress)
    again = await _click(sb, "U_FIN1", (await sb.rt.store.approvals.get(big.approval.id)), ACTION_APPROVE)
    t.line(("U_FIN1 again: ", "dim"), again)
    await _click(sb, "U_FIN2", (await sb.rt.store.approvals.get(big.approval.id)), ACTION_APPROVE)
    await _settle(sb, big.session_id)
    t.line(("after U_FIN2: ", "dim"), (_header(_card(sb, big.approval.id)), "bold"))
    ok &= (
        "1 of 2" in progress
        and "already voted" in again
        and _header(_card(sb, big.approval.id)).startswith("Approved and done")
    )

    t.step("5. U_SUPPORT2 modifies a refund: the form checks the amount, and a larger amount goes to finance")
    mod = await _refund(sb, 60, "Only the mug broke.", order="78300")
    assert mod.approval is not None
    await sb.dispatcher.click("U_SUPPORT2", copy.deepcopy(_card(sb, mod.approval.id)), ACTION_MODIFY)
    view_id = sb.page.open_views["U_SUPPORT2"]
    bad = await sb.page.act(
        "U_SUPPORT2", {"kind": "submit", "view_id": view_id, "values": _values(sb, view_id, amount="-5")}
    )
    t.line(("amount -5: inline error: ", "dim"), str(bad.get("errors")))
    good = await sb.page.act(
        "U_SUPPORT2", {"kind": "submit", "view_id": view_id, "values": _values(sb, view_id, amount="900")}
    )
    await _settle(sb)
    old = await sb.rt.store.approvals.get(mod.approval.id)
    t.line(
        ("amount 900: ", "dim"),
        f"{old.id} is {old.status}; new card ",
        (str(old.superseded_by), "bold"),
        f" needs finance ({good.get('ok')})",
    )
    ok &= bool(bad.get("errors")) and old.superseded_by is not None

    t.step("6. /hitl pending as U_FIN3")
    await sb.dispatcher.command("U_FIN3", "general", "pending")
    pending = [m for m in sb.state.messages if m.ephemeral_to == "U_FIN3"][-1]
    t.line(("U_FIN3 sees: ", "dim"), pending.text)
    ok &= old.superseded_by is not None and old.superseded_by in str(pending.blocks)
    return ok


async def _trust_and_spot_checks(sb: Sandbox, t: _Transcript) -> bool:
    """Steps 7-8: a Trust for one agent in one session, and a spot check flagged."""
    ok = True
    svc = sb.rt.runtime.contexts.default.service
    t.step("7. Trust: U_SUPPORT1 trusts an agent's refund; its next refund in that session runs without a card")
    first = await _agent_refund(sb, "78310", 25)
    assert first.approval is not None
    await _settle(sb)
    await _click(sb, "U_SUPPORT1", first.approval, ACTION_TRUST)
    await _settle(sb)
    trusted = _card(sb, first.approval.id)
    scope = next((b["text"]["text"] for b in trusted.blocks if "_Trust:_" in str(b.get("text", {}))), "")
    t.line(("card: ", "dim"), (_header(trusted), "bold"))
    t.line(("it says: ", "dim"), scope.split("_Trust:_ ", 1)[-1])
    second = await _agent_refund(sb, "78311", 30)
    await _settle(sb)  # its FYI is posted by the bot's worker
    fyi = [m.text for m in sb.state.messages if "ran without review" in m.text]
    t.line(
        (f"the next refund in {TRUST_SESSION}: ", "dim"),
        ("ran without a card" if second.may_run and second.approval is None else "NEEDED A CARD", "bold"),
        ("   reviewers see: ", "dim"),
        fyi[-1] if fyi else "(no FYI)",
    )
    covers = "For agent:chat only" in scope and "refund calls in session chat-42 run without review" in scope
    ok &= covers and second.may_run and bool(fyi)

    t.step("8. A spot check: the agent's stock check ran without review; U_SUPPORT2 looks at it after the fact")
    stock = await svc.propose(ProposeRequest("check_stock", {"sku": "MUG-1"}, session_id=TRUST_SESSION))
    await _settle(sb)
    check = next(a for a in (await sb.rt.store.approvals.list_pending(limit=200)).items if a.tool == "spot:check_stock")
    t.line(
        ("ran at once: ", "dim"),
        str(stock.may_run),
        ("   then in the channel: ", "dim"),
        (_header(_card(sb, check.id)), "bold"),
    )
    await sb.dispatcher.click("U_SUPPORT2", copy.deepcopy(_card(sb, check.id)), ACTION_REJECT)
    view_id = sb.page.open_views["U_SUPPORT2"]
    note = {"hitl_reason": {"value": {"type": "plain_text_input", "value": "we sell no such mug"}}}
    await sb.page.act("U_SUPPORT2", {"kind": "submit", "view_id": view_id, "values": note})
    await _settle(sb)
    await sb.rt.store.tallies.flush()
    now = svc.clock.now()
    rows = summarize(await sb.rt.store.tallies.read(since=now - 3600, now=now + 1))
    row = next((r for r in rows if r.tool == "check_stock"), None)
    flagged = _header(_card(sb, check.id))
    t.line(
        ("after the flag: ", "dim"),
        (flagged, "bold"),
        ("   audit yield: ", "dim"),
        f"{row.audit_yield if row else None}",
    )
    ok &= stock.may_run and flagged.startswith("Flagged") and row is not None and row.audit_yield == 1.0
    return ok


async def _practice_and_the_stop_switch(sb: Sandbox, t: _Transcript) -> bool:
    """Steps 9-10: a practice twin missed, and the stop switch."""
    ok = True
    svc = sb.rt.runtime.contexts.default.service
    t.step("9. Practice: a reorder's approval gets a practice twin with a planted defect; U_SUPPORT1 misses it")
    order = await svc.propose(ProposeRequest("reorder_stock", {"sku": "MUG-1", "quantity": 10}, session_id="ops-7"))
    await _settle(sb)
    assert order.approval is not None
    twin = next(
        a
        for a in (await sb.rt.store.approvals.list_pending(limit=200)).items
        if a.metadata.get("of") == order.approval.id
    )
    t.line(
        ("two cards: ", "dim"),
        (_header(_card(sb, order.approval.id)), "bold"),
        ("  and  ", "dim"),
        (_header(_card(sb, twin.id)), "bold"),
    )
    told = await _click(sb, "U_SUPPORT1", twin, ACTION_APPROVE)
    t.line(("U_SUPPORT1 approves the second, and alone is told: ", "dim"), told)
    ok &= "That was a practice check" in told and "missed" in told

    t.step("10. The stop switch: U_ADMIN halts refunds; a new refund pauses; the unhalt lets it go on")
    await sb.dispatcher.command(ADMIN, "general", "halt refund a refund bug is being fixed")
    said = [m for m in sb.state.messages if m.ephemeral_to == ADMIN][-1].text
    held = await _refund(sb, 45, "Halted meanwhile.", order="78292")
    t.line((f"{ADMIN} is told: ", "dim"), said)
    t.line(("a new refund run: ", "dim"), f"{held.status} ({held.reason})")
    await sb.dispatcher.command(ADMIN, "general", "unhalt refund")
    await _settle(sb, held.session_id)
    after = await sb.rt.store.runs.load(held.session_id)
    waiting = after.data.get("waiting") if after is not None else None
    t.line(("after the unhalt: ", "dim"), [m for m in sb.state.messages if m.ephemeral_to == ADMIN][-1].text)
    t.line(("the run now waits on: ", "dim"), str(waiting))
    ok &= held.status is RunStatus.PAUSED and str(held.reason).startswith("halted:") and bool(waiting)
    return ok


def _values(sb: Sandbox, view_id: str, **overrides: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for block in sb.state.views[view_id]["blocks"]:
        if block["type"] != "input":
            continue
        name = block["block_id"].split(":", 1)[1]
        el = block["element"]
        out[block["block_id"]] = {"value": {"type": el["type"], "value": overrides.get(name, el.get("initial_value"))}}
    return out
