"""What the CLI prints: Rich for people, one JSON object for machines. Untrusted text is never markup."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hitl.api.models import ApprovalView, AuditView
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, Status, asker_text
from hitl.engine.domain.practice import is_practice, practice_note
from hitl.engine.domain.records import AuditBreak, AuditEntry
from hitl.engine.domain.redaction import reveal_hidden
from hitl.engine.domain.runs import RunResult, RunStatus

__all__ = ["Out", "approval_json", "asked_by"]


def approval_json(a: Approval | ApprovalView) -> dict[str, Any]:
    """``hitl show --json``: the API's view of an approval (the same fields ``GET /api/v1/approvals/{id}`` has)."""
    view = a if isinstance(a, ApprovalView) else ApprovalView.of(a)
    return view.model_dump(mode="json", exclude={"can_decide", "audit"} if view.audit is None else {"can_decide"})


def asked_by(v: ApprovalView) -> str | None:
    """Which framework and agent asked, in which session (as the card says it)."""
    about = v.asked_by or {}
    return asker_text(about.get("framework"), about.get("agent"), v.session_id)


def resume_command(a: Approval) -> str:
    """The command that approves ``a`` from the CLI."""
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
            obj["history"] = list(r.history)
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

    def agent_decision(self, a: Approval | ApprovalView, history: tuple[str, ...] = ()) -> None:
        """A decision on an approval no workflow run owns (an agent's, an MCP client's, a Temporal workflow's):
        only the decision was recorded; the caller that asked runs the call, or is told no, when it next looks."""
        v = a if isinstance(a, ApprovalView) else ApprovalView.of(a)
        about = v.asked_by or {}
        caller = about.get("framework") or "caller"
        if v.status is Status.PENDING:
            what = f"{v.approvals} of {v.quorum} approvals recorded; still waiting"
        elif v.status in (Status.APPROVED, Status.EXECUTING, Status.EXECUTED):
            what = f"decision recorded; the {caller} that asked runs the call when it next checks"
        else:
            what = f"decision recorded; the {caller} that asked is told it did not run"
        practice = v.practice or (practice_note(a) if isinstance(a, Approval) and is_practice(a) else None)
        if practice is not None:  # told to the decider only
            what = practice
        if self.json:
            self.emit(
                {
                    "status": str(v.status),
                    "session_id": v.session_id,
                    "approval_id": v.id,
                    "approval": approval_json(v),
                    "run": None,
                    "next": what,
                    "history": list(history),
                }
            )
            return
        for line in history:
            self.text(("  · ", "dim"), line)
        style = "bold red" if v.status in (Status.REJECTED, Status.EXPIRED, Status.CANCELLED) else "bold green"
        self.text((str(v.status), style), f"  approval {v.id}  ", what)
        self.approval(v)

    def remote_result(self, status: RunStatus, session_id: str, approval: ApprovalView | None, note: str) -> None:
        """Where things stand after a decision or resume made through the API (the server continues the run)."""
        if self.json:
            obj: dict[str, Any] = {"status": str(status), "session_id": session_id}
            if approval is not None:
                obj["approval_id"] = approval.id
                obj["approval"] = approval_json(approval)
            if note:
                obj["reason"] = note
            self.emit(obj)
            return
        style = {RunStatus.COMPLETED: "bold green", RunStatus.PAUSED: "bold yellow"}.get(status, "bold red")
        self.text((f"{status}", style), f"  session {session_id}", (f"  {note}" if note else "", ""))
        if approval is not None:
            self.approval(approval)

    def approval(self, a: Approval | ApprovalView) -> None:
        v = a if isinstance(a, ApprovalView) else ApprovalView.of(a)
        t = Table.grid(padding=(0, 2))
        t.add_column(style="dim")
        t.add_column()
        t.add_row("approval", Text(f"{v.id}  ({v.status}, v{v.version}, hash {short_hash(v.action_hash)})"))
        t.add_row("action", Text(reveal_hidden(f"{v.tool} {json.dumps(v.execute_args, ensure_ascii=False)}")))
        who = f"{v.required_role or 'any reviewer'}" + (
            f", {v.approvals} of {v.quorum} approvals" if v.quorum > 1 else ""
        )
        t.add_row("tier", Text(f"{v.tier} by {who}; requested by {v.requester}; expires {v.expires_at}"))
        if asker := asked_by(v):
            t.add_row("asked by", Text(asker))
        for reason in v.reasons:
            t.add_row("why", Text(reason))
        for d in v.decisions:
            t.add_row(
                "decision",
                Text(f"{d.decision} by {d.reviewer} at {d.at} via {d.via}" + (f": {d.reason}" if d.reason else "")),
            )
        if v.evidence:
            t.add_row("evidence", Text(f"(untrusted) {reveal_hidden(v.evidence)}", style="italic"))
        self.console.print(t)

    def pending(self, items: list[Approval] | list[ApprovalView]) -> None:
        views = [a if isinstance(a, ApprovalView) else ApprovalView.of(a) for a in items]
        if self.json:
            self.emit({"pending": [approval_json(v) for v in views], "count": len(views)})
            return
        if not views:
            self.text(("no pending approvals", "dim"))
            return
        t = Table(header_style="bold")
        t.add_column("id", no_wrap=True, min_width=len(views[0].id))  # whole, so it can be copied at 80 columns
        for name in ("tool", "tier", "role", "votes", "requester", "expires"):
            t.add_column(name, overflow="fold")
        for v in views:
            t.add_row(
                v.id,
                Text(v.tool),
                str(v.tier),
                v.required_role or "any",
                f"{v.approvals}/{v.quorum}",
                Text(v.requester),
                v.expires_at,
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

    def audit(self, entries: list[AuditEntry] | list[AuditView]) -> None:
        views = [e if isinstance(e, AuditView) else AuditView.of(e) for e in entries]
        if self.json:
            self.emit({"audit": [v.model_dump(mode="json") for v in views]})
            return
        t = Table("at", "event", "actor", "approval", "v", "outcome", "detail", header_style="bold")
        for v in views:
            t.add_row(
                v.at, v.event, Text(v.actor), v.approval_id or "", str(v.version or ""), v.outcome, Text(v.detail)
            )
        self.console.print(t)
