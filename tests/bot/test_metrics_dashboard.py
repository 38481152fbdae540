"""The Grafana dashboard in the repository queries only metrics `hitl serve` exports, and shows every
store-computed family."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from hitl.bot.metrics import HITL_METRICS
from hitl.bot.views.controls import ACTION_APPROVE
from tests.bot.conftest import Harness
from tests.bot.test_http_edges import pending

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "hitl-dashboard.json"


def _queries(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [str(v) for k, v in node.items() if k in ("expr", "query") and isinstance(v, str)]
        return found + [q for v in node.values() for q in _queries(v)]
    if isinstance(node, list):
        return [q for v in node for q in _queries(v)]
    return []


async def test_every_dashboard_query_names_an_exported_metric(harness: Harness) -> None:
    a = await pending(harness)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_APPROVE)
    await harness.rt.ctx.metrics.sweep()  # the background sweep's read of the store
    async with harness.http.get(f"{harness.bot_url}/metrics") as resp:
        exposed = await resp.text()
    exported = {line.split("{")[0].split(" ")[0] for line in exposed.splitlines() if line and line[0] != "#"}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposed, re.M):  # families with no sample yet
        exported |= {name, *(f"{name}_{s}" for s in ("bucket", "sum", "count"))} if kind == "histogram" else {name}
    queries = _queries(json.loads(DASHBOARD.read_text()))
    named = {m for q in queries for m in re.findall(r"\bhitl_[a-z_]+", q)}
    assert named and named - exported == set(), f"the dashboard queries metrics nobody exports: {named - exported}"
    families = {re.sub(r"_(bucket|sum|count|total)$", "", m) for m in named}
    assert set(HITL_METRICS) <= families  # every store-computed family is on the dashboard
