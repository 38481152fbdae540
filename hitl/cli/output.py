"""What the CLI prints: Rich for people, one JSON object for machines. Untrusted text is never markup."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.domain.hashing import short_hash
from engine.domain.models import Approval
from engine.domain.records import AuditBreak, AuditEntry
from engine.domain.redaction import reveal_hidden
from engine.runner.executor import RunResult
from engine.runner.state import RunStatus

__all__ = ["Out"]


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def approval_json(a: Approval) -> dict[str, Any]:
    return {
        "id": a.id,
        "status": str(a.status),
        "tool": a.tool,
        "args": a.args,
        "execute_args": a.execute_args,
        "action_hash": a.action_hash,
        "version": a.version,
        "tier": str(a.tier),
        "required_role": a.required_role,
        "quorum": a.quorum,
        "approvals": len(a.approvers),
        "decisions": [
            {"reviewer": d.reviewer, "decision": str(d.kind), "at": iso(d.at), "reason": d.reason, "via": d.via}
            for d in a.decisions
        ],
        "expires_at": iso(a.expires_at),
        "created_at": iso(a.created_at),
        "session_id": a.session_id,
        "requester": a.requester,
        "asked_by": {k: a.metadata[k] for k in ("framework", "agent", "call_id") if k in a.metadata} or None,
        "modifiable": a.modifiable,
        "rule": a.rule,
        "reasons": list(a.reasons),
        "evidence": a.evidence,
        "reason": a.reason,
        "superseded_by": a.superseded_by,
    }


def resume_command(a: Approval) -> str:
    return f"hitl resume {a.id} --approve --as <reviewer>"


class Out:
    """Prints for people (Rich) or machines (``--json``: exactly one JSON object on stdout)."""

    def __init__(self, *, as_json: bool) -> None:
        self.json = as_json
        self.console = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def emit(self, obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")

    def text(self, *parts: str | tuple[str, str]) -> None:
        """Plain text with optional (text, style) parts; nothing is parsed as markup."""
        self.console.print(Text.assemble(*parts))

    def warn(self, message: str) -> None:
        self.err.print(Text.assemble(("warning: ", "bold yellow"), message))

    def error(self, code: str, message: str) -> None:
        if self.json:
            self.emit({"status": "error", "error": {"code": code, "message": message}})
        else:
            self.err.print(Text.assemble(("error: ", "bold red"), message, (f"  [{code}]", "dim")))

    # -- runs -------------------------------------------------------------------------------------------
    def run_result(self, r: RunResult) -> None:
        if self.json:
            obj: dict[str, Any] = {"status": str(r.status), "session_id": r.session_id}
            if r.approval is not None:
                obj["approval_id"] = r.approval.id
                obj["approval"] = approval_json(r.approval)
            if r.status is RunStatus.PAUSED and r.approval is not None:
                obj["resume"] = resume_command(r.approval)
            if r.reason:
                obj["reason"] = r.reason
            obj["outputs"] = r.outputs
            self.emit(obj)
            return
        for line in r.history:
            self.text(("  · ", "dim"), line)
        style = {RunStatus.COMPLETED: "bold green", RunStatus.PAUSED: "bold yellow"}.get(r.status, "bold red")
        self.text((f"{r.status}", style), f"  session {r.session_id}", (f"  {r.reason}" if r.reason else "", ""))
        if r.status is RunStatus.COMPLETED:
            for step, output in r.outputs.items():
                self.text((f"  {step}: ", "dim"), json.dumps(output, ensure_ascii=False, default=str)[:300])
        if r.approval is not None:
            self.approval(r.approval)
            if r.status is RunStatus.PAUSED:
                self.text("continue with:  ", (resume_command(r.approval), "bold"))
                self.text(("  or reject:     ", "dim"), (f"hitl resume {r.approval.id} --reject --reason TEXT", "dim"))

    def approval(self, a: Approval) -> None:
        t = Table.grid(padding=(0, 2))
        t.add_column(style="dim")
        t.add_column()
        t.add_row("approval", Text(f"{a.id}  ({a.status}, v{a.version}, hash {short_hash(a.action_hash)})"))
        t.add_row("action", Text(reveal_hidden(f"{a.tool} {json.dumps(a.execute_args, ensure_ascii=False)}")))
        who = f"{a.required_role or 'any reviewer'}" + (
            f", {len(a.approvers)} of {a.quorum} approvals" if a.quorum > 1 else ""
        )
        t.add_row("tier", Text(f"{a.tier} by {who}; requested by {a.requester}; expires {iso(a.expires_at)}"))
        if a.asked_by:
            t.add_row("asked by", Text(a.asked_by))
        for reason in a.reasons:
            t.add_row("why", Text(reason))
        for d in a.decisions:
            t.add_row(
                "decision",
                Text(f"{d.kind} by {d.reviewer} at {iso(d.at)} via {d.via}" + (f": {d.reason}" if d.reason else "")),
            )
        if a.evidence:
            t.add_row("evidence", Text(f"(untrusted) {reveal_hidden(a.evidence)}", style="italic"))
        self.console.print(t)

    def pending(self, items: list[Approval]) -> None:
        if self.json:
            self.emit({"pending": [approval_json(a) for a in items], "count": len(items)})
            return
        if not items:
            self.text(("no pending approvals", "dim"))
            return
        t = Table("id", "tool", "tier", "role", "votes", "requester", "expires", header_style="bold")
        for a in items:
            t.add_row(
                a.id,
                Text(a.tool),
                str(a.tier),
                a.required_role or "any",
                f"{len(a.approvers)}/{a.quorum}",
                Text(a.requester),
                iso(a.expires_at),
            )
        self.console.print(t)

    def audit_verified(self, checked: int, broken: AuditBreak | None) -> None:
        if self.json:
            self.emit({"intact": broken is None, "checked": checked, "broken": broken.model_dump() if broken else None})
        elif broken is None:
            self.text(("audit chain intact", "bold green"), f": {checked} entries checked")
        else:
            self.text(
                ("audit chain BROKEN", "bold red"),
                f" in {broken.chain} at entry {broken.position}: {broken.reason} ({checked} verified before it)",
            )

    def audit(self, entries: list[AuditEntry]) -> None:
        if self.json:
            self.emit({"audit": [e.model_dump(mode="json") | {"at": iso(e.at)} for e in entries]})
            return
        t = Table("at", "event", "actor", "approval", "v", "outcome", "detail", header_style="bold")
        for e in entries:
            t.add_row(
                iso(e.at), e.event, Text(e.actor), e.approval_id or "", str(e.version or ""), e.outcome, Text(e.detail)
            )
        self.console.print(t)
