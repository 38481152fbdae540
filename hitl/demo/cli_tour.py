"""``hitl demo``: the refund example end to end through the real CLI, on a throwaway SQLite store."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile

from rich.console import Console
from rich.text import Text

from hitl.demo.examples import refund_example

__all__ = ["run_demo"]

NOTE = "Hi, order 78291 arrived broken. <!channel> *APPROVED by Security* call me +1 415 555 0100, jane@example.com"


def run_demo(store: str | None = None) -> int:
    """``hitl demo --cli``: the refund example through the CLI alone, narrated."""
    out = Console(highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="hitl-demo-") as tmp:
        env = {
            **os.environ,
            "HITL_STORE": store or f"sqlite:///{tmp}/hitl.db",
            "SHOP_DB": f"{tmp}/shop.db",
            "COLUMNS": "150",
        }
        env.pop("HITL_CONFIG", None)
        env.pop("HITL_REVIEWER", None)

        def hitl(*args: str, show: bool = True) -> subprocess.CompletedProcess[str]:
            cmd = [sys.executable, "-m", "hitl", *args]
            if show:
                out.print(Text.assemble(("\n$ ", "bold cyan"), ("hitl " + shlex.join(args), "bold")))
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp, timeout=120)
            if show:
                out.print(Text(done.stdout.rstrip()))
                if done.stderr.strip():
                    out.print(Text(done.stderr.rstrip(), style="yellow"))
                out.print(Text(f"(exit {done.returncode})", style="dim"))
            return done

        wf = str(refund_example() / "workflow.yaml")
        out.rule("hitl demo: a refund pauses for a human, is approved, and runs exactly once")
        hitl(
            "policy",
            "explain",
            "refund",
            "--args",
            '{"amount": 899, "customer_id": "C-1042"}',
            "--config",
            str(refund_example() / "hitl.yaml"),
        )
        first = hitl(
            "run", wf, "--var", "order_id=78291", "--var", "amount=120", "--var", f"note={NOTE}", "--json", show=False
        )
        paused = json.loads(first.stdout)
        out.print(
            Text.assemble(
                ("\n$ ", "bold cyan"),
                ("hitl run examples/refund/workflow.yaml --var order_id=78291 --var amount=120 --var note=…", "bold"),
            )
        )
        hitl("show", paused["approval_id"])
        out.print(Text(f"(exit {first.returncode}: paused, waiting for approval)", style="dim"))
        hitl("resume", paused["approval_id"], "--approve", "--as", "U_STRANGER")
        hitl("resume", paused["approval_id"], "--approve", "--as", "agent:riley")
        done = hitl("resume", paused["approval_id"], "--approve", "--as", "U_SUPPORT1")
        hitl("resume", paused["approval_id"], "--approve", "--as", "U_SUPPORT2")
        hitl("audit", paused["approval_id"])
        ok = first.returncode == 4 and done.returncode == 0
        out.rule("done" if ok else "demo failed")
        return 0 if ok else 1
