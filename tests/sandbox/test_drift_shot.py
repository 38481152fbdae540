"""The docs' screenshot of an approval asked again because its consequence drifted (docs/pages/screenshots/
card-drift.png and .txt), taken from the sandbox as the browser draws it, as the other card screenshots are: hitl's
notice, what was approved, then what will happen now."""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import expect

from hitl.engine.agents.ask import Approvals
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.testing import FakeClock
from tests.sandbox.test_browser import DOCS_SHOTS, browser_page, card, docs_sandbox, steady_shot
from tests.waiting import eventually

DRIFT_CONFIG = """
requester: agent:riley
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
policy:
  tools:
    pay_invoice:
      role: support
      summary: "Pay {{ args.amount | money }} on invoice {{ args.invoice }}"
      schema:
        type: object
        properties:
          invoice: {type: string, title: Invoice}
          amount: {type: number, title: Amount, x-currency: EUR}
        required: [invoice, amount]
      consequence: "tests.consequence_tools:invoice"
      consequence_check: true
slack:
  channel: "#refund-approvals"
"""


async def test_the_docs_show_a_drift_re_ask_card(tmp_path: Path) -> None:
    clock = FakeClock()
    sb = await docs_sandbox(tmp_path, DRIFT_CONFIG, clock)
    svc = sb.rt.runtime.contexts.default.service
    args = {"invoice": "INV-1042", "amount": 250}
    asking = asyncio.create_task(
        Approvals(svc).ask("pay_invoice", args, session="ses_DOCS000030", requester="agent:riley")
    )
    try:

        async def pending(besides: set[str]) -> Approval | None:
            page = (await svc.store.approvals.list_pending()).items
            return next((a for a in page if a.id not in besides), None)

        first = await eventually(lambda: pending(set()), what="the payment asked")
        await svc.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.APPROVE))
        again = await eventually(lambda: pending({first.id}), what="the payment asked again")
        assert again.drift is not None and not asking.done()
        async with browser_page(height=1600) as page:
            await page.goto(f"{sb.url}/?as=U_SUPPORT2")
            found = card(page, f"Approval {again.id} v1")  # not the drifted one's, which names it too
            await expect(found).to_contain_text("Asked again", timeout=15000)
            await expect(found).to_contain_text("What was approved")
            await expect(found).to_contain_text("900.0 → 650.0")
            await expect(found).to_contain_text("600.0 → 350.0")
            await sb.rt.ctx.notifier.flush()
            DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
            await steady_shot(page, sb, found, "card-drift")
    finally:
        asking.cancel()
        await sb.close()
