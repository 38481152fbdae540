"""MCP gateway latency: what ``hitl mcp`` adds to an allowed (AUTO) tool call, against calling the same upstream
MCP server directly, and against the floor: a pass-through proxy on the same SDK (``bench/mcp_proxy.py``), in the
same run.

Both sides are the SDK's client over stdio; the gateway side adds one process hop and the gate's decision. Rounds
alternate which side goes first; each round times CALLS sequential calls per side (wall clock: the hop is I/O).
Target: at most 3 ms added per call (median): the gateway is one more stdio hop through the SDK on each side (about
what the direct call itself costs), plus the gate's decision (~10 µs, see gate_bench.py). Run with `make bench` or
`.venv/bin/python bench/mcp_bench.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, median, median_ci, row  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from report import bar, chart, report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "mcp" / "upstream.py"
PROXY = Path(__file__).resolve().parent / "mcp_proxy.py"
TARGET_MS = 3.0
TARGET_OVER_PROXY = 1.10
"""The goal: what the gateway adds is within 10% of what a pass-through proxy on the same SDK adds."""


@asynccontextmanager
async def client(command: list[str], env: dict[str, str], cwd: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        config = Path(d) / "hitl.yaml"
        config.write_text(
            "policy: {allowed_tools: [look_up_order]}\n"
            f"mcp: {{servers: {{shop: {{command: [{sys.executable}, {UPSTREAM}]}}}}}}\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HITL_STORE": f"sqlite:///{d}/b.db", "HITL_CONFIG": str(config)}
        env["HITL_TEST_LEDGER"] = f"{d}/ledger.db"
        async with (
            client([sys.executable, str(UPSTREAM)], env, d) as direct,
            client([sys.executable, "-m", "hitl", "mcp"], env, d) as gated,
            client([sys.executable, str(PROXY), sys.executable, str(UPSTREAM)], env, d) as proxied,
        ):
            sides = {"direct": direct, "gateway": gated, "proxy": proxied}
            for s in sides.values():  # warm both
                for _ in range(20):
                    await s.call_tool("look_up_order", {"order_id": "1"})
            per_call: dict[str, list[float]] = {name: [] for name in sides}
            added: list[float] = []
            proxy_added: list[float] = []
            for r in range(opts.rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                spent: dict[str, float] = {}
                for name in order:
                    t0 = time.perf_counter()
                    for i in range(opts.calls):
                        await sides[name].call_tool("look_up_order", {"order_id": str(i)})
                    spent[name] = (time.perf_counter() - t0) / opts.calls * 1e3
                    per_call[name].append(spent[name])
                added.append(spent["gateway"] - spent["direct"])
                proxy_added.append(spent["proxy"] - spent["direct"])
    heading(f"hitl mcp on an allowed call ({opts.rounds} interleaved rounds of {opts.calls} calls, stdio)")
    row("upstream called directly, per call (median)", f"{median(per_call['direct']):.2f} ms")
    row("through hitl mcp, per call (median)", f"{median(per_call['gateway']):.2f} ms")
    row("floor: through a pass-through proxy on the same SDK (median)", f"{median(per_call['proxy']):.2f} ms")
    lo, hi = median_ci(added)
    mid = median(added)
    row(
        "added by the gateway, median [95% CI]",
        f"{mid:.2f} [{lo:.2f}, {hi:.2f}] ms",
        f"<= {TARGET_MS:g} ms",
        mid <= TARGET_MS,
    )
    floor = median(proxy_added)
    lo, hi = median_ci(proxy_added)
    row("  added by the pass-through proxy, median [95% CI]", f"{floor:.2f} [{lo:.2f}, {hi:.2f}] ms", "(floor)")
    ratio = mid / floor
    row(
        "hitl mcp's addition / the proxy's",
        f"{ratio:.2f}x",
        f"<= {TARGET_OVER_PROXY:.2f}x",
        ratio <= TARGET_OVER_PROXY,
    )
    chart(
        "What one more MCP hop adds to an allowed call (stdio)",
        "ms added per call",
        [bar("hitl mcp (gate + hop)", added), bar("floor: a pass-through proxy, same SDK", proxy_added, floor=True)],
        goal=floor * TARGET_OVER_PROXY,
        goal_label="proxy + 10%",
    )


if __name__ == "__main__":
    with report("mcp", "hitl mcp: added latency per allowed call"):
        asyncio.run(main())
