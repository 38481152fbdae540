"""What the CLI prints: Rich for people, one JSON object for machines. Untrusted text is never markup."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

from hitl.api.group_decision_models import GroupDecisionView
from hitl.api.models import ApprovalView, AuditView
from hitl.cli.trimmed import Trimmed
from hitl.engine.domain.audit_heads import view_problem
from hitl.engine.domain.consequences import WHAT_WILL_HAPPEN, Consequence
from hitl.engine.domain.display import show
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, Status, asker_text
from hitl.engine.domain.presentation import NO_VIEW, look_closely
from hitl.engine.domain.ranking import TIER_WORDS, waiting_text
from hitl.engine.domain.records import AuditBreak, AuditEntry
from hitl.engine.domain.redaction import reveal_hidden
from hitl.engine.domain.runs import RunResult, RunStatus
from hitl.mail.states import DELIVERY_EVENTS, delivery_line

# Rich is imported by what draws for people, when it draws: a `--json` command (most scripted calls, and the
# suite's) never does, and importing it cost each such call some 30 ms of CPU.
if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

__all__ = ["Out", "approval_json", "asked_by", "deciders"]


def approval_json(view: ApprovalView) -> dict[str, Any]:
    """``hitl show --json``: the API's view of an approval (the same fields ``GET /api/v1/approvals/{id}`` has)."""
    return view.model_dump(mode="json", exclude={"can_decide", "audit"} if view.audit is None else {"can_decide"})


def asked_by(v: ApprovalView) -> str | None:
    """Which framework and agent asked, in which session (as the card says it)."""
    about = v.asked_by or {}
    return asker_text(about.get("framework"), about.get("agent"), v.session_id)


def deciders(a: Approval, roles: dict[str, list[str]]) -> str | None:
    """Who may decide ``a``, in words: its role's members (its requester left out: nobody approves their own
    action), the first few when there are many; None when no role is named or ``roles`` does not know it."""
    if a.required_role is None or a.required_role not in roles:
        return None
    members = [m for m in roles[a.required_role] if m != a.requester]
    if not members:
        return f"nobody: role {a.required_role} has no member but the requester; add one in hitl.yaml"
    shown = ", ".join(members[:5]) + (f" and {len(members) - 5} more" if len(members) > 5 else "")
    return f"{shown} (role {a.required_role})"


def resume_command(a: Approval) -> str:
    """The command that approves ``a`` from the CLI."""
    return f"hitl resume {a.id} --approve --as <reviewer>"


def _audit_lines(row: Sequence[str | Text]) -> list[RenderableType]:
    """An audit entry in two lines, as ``git log --oneline`` reads: when, what, on which approval (version),
    the outcome and who; then the detail, indented and wrapped at words (a consequence's carries a digest or two,
    longer than a terminal line with its words around it)."""
    from rich.padding import Padding
    from rich.text import Text

    at, event, actor, approval, version, outcome, detail = row
    where = [f"{approval} v{version}" if version else str(approval)] if str(approval) else []
    head = Text("  ").join([Text(str(at), "dim"), Text(str(event), "bold"), *map(Text, where), Text(str(outcome))])
    head.append_text(Text.assemble("  ", actor))
    return [head, Padding(Text.assemble(detail), (0, 0, 0, 4), expand=False)] if str(detail) else [head]


def _arguments(t: Table, view: Mapping[str, Any]) -> None:
    """A canonical view's arguments, each in full, typed, its hidden characters and look-alikes marked, and what an
    edit changed."""
    from rich.text import Text

    for field in view.get("fields", []):
        name = reveal_hidden(str(field["name"]))
        shown = f"{field['label']} ({name})" if field["label"] != field["name"] else name
        t.add_row(f"  {shown}", Text(f"{field['text']}  ({field['kind']})"))
        for warning in field["warnings"]:
            t.add_row("", Text(f"! {warning}", style="bold yellow"))
    for change in view.get("changes", []):
        t.add_row("changed", Text(f"{reveal_hidden(change['name'])}: {change['before']} -> {change['after']}"))


def _consequence(t: Table, shown: Mapping[str, Any], title: str = WHAT_WILL_HAPPEN) -> None:
    """What will happen, under hitl's label and apart from it: the tool's output line by line, as plain text (never
    markup), drawn as arguments are, then what could fool the eye in it."""
    from rich.text import Text

    c = Consequence.model_validate({k: v for k, v in shown.items() if k != "sha256"})
    lines = c.lines()
    said = "computed by the tool's own code from these arguments" if c.shown else "not computed"
    t.add_row(title.lower(), Text(f"({said}; shown as text)", style="dim"))
    for line, _ in lines:
        t.add_row("", Text(line))
    marks = list(dict.fromkeys(w for _, warnings in lines for w in warnings))
    if marks:
        t.add_row("", Text(f"! look closely: {'; '.join(marks)}", style="bold yellow"))


def _look_closely(v: ApprovalView) -> str | None:
    """What could fool the eye in ``v``'s arguments, as its one view names them (each by its label), in one line."""
    fields = (v.view or {}).get("fields") or [{"name": name, "label": name} for name in v.execute_args]
    marked = (  # marked as the view (drawn with the declared schema) warned: a declared string is not marked
        (str(f["label"]), show(v.execute_args.get(f["name"])).marks if f.get("warnings", True) else ())
        for f in fields
        if f["name"] in v.execute_args
    )
    return look_closely(marked)


def _fitted(parts: Sequence[Sequence[str]], width: int) -> Text:
    """A line of ``parts`` in priority order, each the first of its choices that still fits ``width`` (the first
    part always), so a narrow terminal drops what matters least rather than cutting what matters most."""
    from rich.cells import cell_len
    from rich.text import Text

    line = Text()
    for i, choices in enumerate(parts):
        fits = [c for c in choices if i == 0 or cell_len(line.plain) + cell_len(c) <= width]
        if fits:
            line.append(fits[0], "yellow" if "! " in fits[0] else "")
    return line


def seen_check(entry: AuditView) -> bool | None:
    """Whether a decision's recorded view is the one its digest names (None: the decider was shown no view), by
    the check ``hitl audit verify`` makes."""
    if entry.view is None and entry.view_digest is None:
        return None
    return view_problem(entry.view, entry.view_digest) is None


class _Said(Protocol):
    """A recorded decision as ``hitl audit show`` reads it: the store's or the API's."""

    @property
    def reviewer(self) -> str: ...
    @property
    def reason(self) -> str | None: ...


def decision_reasons(actors: Sequence[str], decisions: Sequence[_Said]) -> list[str | None]:
    """The reason each ``decided`` audit entry's decision carries, in the entries' order: each entry (by its
    ``actors``) takes its decider's next recorded decision (None: none recorded, or no reason given)."""
    left = list(decisions)
    out: list[str | None] = []
    for actor in actors:
        found = next((d for d in left if d.reviewer == actor), None)
        if found is not None:
            left.remove(found)
        out.append(found.reason if found is not None else None)
    return out


def _saw(entry: AuditView, ok: bool | None) -> Text:
    """What the decider was shown, in words: the card at its version, and whether the record still checks."""
    from rich.text import Text

    if entry.view is None or ok is None:
        return Text(NO_VIEW)
    shown = f"the card as shown at version {entry.view.get('version', '?')} "
    if ok:
        return Text.assemble(shown, ("(checked)", "green"))
    return Text.assemble(shown, ("(DOES NOT MATCH: the record was changed after the decision)", "bold red"))


class Out:
    """Prints for people (Rich) or machines (``--json``: exactly one JSON object on stdout)."""

    def __init__(self, *, as_json: bool) -> None:
        self.json = as_json

    @cached_property
    def console(self) -> Console:
        """Standard output, for people."""
        from rich.console import Console

        return Console(file=cast(IO[str], Trimmed(lambda: sys.stdout)), highlight=False, soft_wrap=True)

    @cached_property
    def err(self) -> Console:
        """Standard error, for people (warnings and errors; a `--json` error is one JSON object on stdout)."""
        from rich.console import Console

        return Console(file=cast(IO[str], Trimmed(lambda: sys.stderr)), highlight=False, soft_wrap=True)

    def emit(self, obj: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")

    def text(self, *parts: str | tuple[str, str], wrap: bool = False) -> None:
        """Plain text with optional (text, style) parts; nothing is parsed as markup. ``wrap``: prose, wrapped at
        words to the terminal (otherwise a line is printed whole: an id or a command never breaks)."""
        from rich.text import Text

        self.console.print(Text.assemble(*parts), soft_wrap=not wrap)

    def warn(self, message: str) -> None:
        """A warning on stderr, wrapped at words to the terminal (an error stays on one line, for logs and grep)."""
        from rich.text import Text

        self.err.print(Text.assemble(("warning: ", "bold yellow"), message), soft_wrap=False)

    def error(self, code: str, message: str) -> None:
        if self.json:
            self.emit({"status": "error", "error": {"code": code, "message": message}})
        else:
            from rich.text import Text

            self.err.print(Text.assemble(("error: ", "bold red"), message, (f"  [{code}]", "dim")))

    def table(
        self,
        headings: Sequence[str],
        rows: Sequence[Sequence[str | Text]],
        *,
        right: Sequence[str] = (),
        narrow: Callable[[Sequence[str | Text]], list[RenderableType]] | None = None,
    ) -> None:
        """Rows for people, nothing in them ever cut: a table when every cell fits the terminal whole, and
        otherwise one block per row (its first cell, then each other heading and value, or the lines ``narrow``
        makes of it), so an id or a time can be copied at 80 columns or from a pipe. ``right`` names the columns
        aligned right (numbers)."""
        from rich.table import Table
        from rich.text import Text

        t = Table(box=None, pad_edge=False, header_style="bold")
        for heading in headings:
            t.add_column(heading, no_wrap=True, justify="right" if heading in right else "left")
        for row in rows:
            t.add_row(*row)
        natural = self.console.measure(t, options=self.console.options.update_width(1 << 16)).maximum
        if natural <= self.console.width:
            self.console.print(t)
            return
        if narrow is not None:
            for row in rows:
                for line in narrow(row):  # wrapped at words where it must: nothing runs past the edge or is cut
                    self.console.print(line, soft_wrap=False)
            return
        width = max(len(h) for h in headings[1:]) if len(headings) > 1 else 0
        for i, row in enumerate(rows):
            if i:
                self.console.print()
            self.console.print(Text(str(row[0]), style="bold"))
            for heading, cell in zip(headings[1:], row[1:], strict=True):
                if str(cell):
                    self.console.print(Text.assemble((f"  {heading:<{width}}  ", "dim"), cell))

    # -- runs -------------------------------------------------------------------------------------------
    def run_result(
        self, r: RunResult, roles: dict[str, list[str]] | None = None, view: ApprovalView | None = None
    ) -> None:
        """A run's result; for a paused run, the approval it waits on (``view``: as the API shows it, given with
        any approval), who may decide it (the members of its role in ``roles``, hitl.yaml's) and the commands
        that decide it."""
        assert (view is None) == (r.approval is None), "a result with an approval is printed with its view"
        if self.json:
            obj: dict[str, Any] = {"status": str(r.status), "session_id": r.session_id}
            if r.approval is not None and view is not None:
                obj["approval_id"] = r.approval.id
                obj["approval"] = approval_json(view)
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
            from rich.text import Text

            for step, output in r.outputs.items():
                shown = Text.assemble((f"  {step}: ", "dim"), json.dumps(output, ensure_ascii=False, default=str))
                # One line each, cut at the terminal's edge with "…" (`--json` gives the outputs whole).
                self.console.print(shown, no_wrap=True, overflow="ellipsis", soft_wrap=False)
        if r.approval is not None and view is not None:
            self.approval(view)
            if r.status is RunStatus.PAUSED:
                if (who := deciders(r.approval, roles or {})) is not None:
                    self.text(("who decides:    ", "dim"), who)
                self.text("continue with:  ", (resume_command(r.approval), "bold"))
                self.text(("  or reject:     ", "dim"), (f"hitl resume {r.approval.id} --reject --reason TEXT", "dim"))

    def agent_decision(self, v: ApprovalView, history: tuple[str, ...] = ()) -> None:
        """A decision on an approval no workflow run owns (an agent's, an MCP client's, a Temporal workflow's):
        only the decision was recorded; the caller that asked runs the call, or is told no, when it next looks."""
        about = v.asked_by or {}
        caller = about.get("framework") or "caller"
        if v.status is Status.PENDING:
            what = f"{v.approvals} of {v.quorum} approvals recorded; still waiting"
        elif v.status in (Status.APPROVED, Status.EXECUTING, Status.EXECUTED):
            what = f"decision recorded; the {caller} that asked runs the call when it next checks"
        else:
            what = f"decision recorded; the {caller} that asked is told it did not run"
        if v.practice is not None:  # told to the decider only
            what = v.practice
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

    def group_decision(self, v: GroupDecisionView) -> None:
        """What one decision on several approvals did, member by member (``--json``: the API's answer)."""
        if self.json:
            self.emit(v.model_dump(mode="json"))
            return
        verb = "approved" if v.decision == "approve" else "rejected"
        total = len(v.members)
        parts = [f"{verb} {v.decided} of {total}"]
        parts += [f"{n} {what}" for n, what in ((v.voted, "voted on"), (v.stale, "stale"), (v.refused, "refused")) if n]
        style = "bold green" if v.decided + v.voted == total else "bold red"
        self.text((", ".join(parts), style))
        for m in v.members:
            if m.outcome == "decided":
                said = verb
            elif m.outcome == "voted":
                role = f" {m.approval.required_role}" if m.approval is not None and m.approval.required_role else ""
                said = f"voted: not {verb} yet, it needs {m.still_needs} more{role} approval"
            else:  # the refusal's own words: what to do next
                said = f"{m.outcome} ({m.code}): {m.message}"
            self.text("  ", (m.id, "bold"), "  ", said)

    def approval(self, v: ApprovalView) -> None:
        """One approval as its one view tells it (the card's headline, reasons, arguments and outcome)."""
        from rich.table import Table
        from rich.text import Text

        view = v.view or {}
        t = Table.grid(padding=(0, 2))
        t.add_column(style="dim")
        t.add_column()
        t.add_row("approval", Text(f"{v.id}  ({v.status}, v{v.version}, hash {short_hash(v.action_hash)})"))
        look = _look_closely(v)  # the headline carries its arguments' marks, as on the card
        heading = reveal_hidden(str(view.get("heading", f"{v.status}: {v.tool}")))
        t.add_row("about", Text.assemble(("! " if look else "", "bold yellow"), heading))
        if look:
            t.add_row("", Text(f"! {look}", style="bold yellow"))
        t.add_row("action", Text(v.tool))
        _arguments(t, view)
        if v.drift is not None:  # asked again: hitl's notice, then what was approved, then what will happen now
            t.add_row("drifted", Text(f"! {v.drift['notice']}", style="bold yellow"))
            _consequence(t, v.drift["seen"], "What was approved")
        if v.consequence is not None:
            _consequence(t, v.consequence)
        who = f"{v.required_role or 'any reviewer'}" + (
            f", {v.approvals} of {v.quorum} approvals" if v.quorum > 1 else ""
        )
        t.add_row("tier", Text(f"{v.tier} by {who}; requested by {v.requester}; expires {v.expires_at}"))
        if asker := asked_by(v):
            t.add_row("asked by", Text(asker))
        for reason in view.get("reasons", v.why):
            t.add_row("why", Text(reason))
        if view.get("outcome"):
            t.add_row("outcome", Text(reveal_hidden(str(view["outcome"]))))
        for d in v.decisions:
            t.add_row(
                "decision",
                # The reason as typed, its hidden and direction-changing characters shown (never sent to a terminal)
                Text(
                    reveal_hidden(
                        f"{d.decision} by {d.reviewer} at {d.at} via {d.via}" + (f": {d.reason}" if d.reason else "")
                    )
                ),
            )
        for e in v.audit or ():
            if e.event in DELIVERY_EVENTS:  # how it reached people beyond its card: e-mail, the page opened
                said = delivery_line(e.event, actor=e.actor, detail=e.detail, outcome=e.outcome)
                t.add_row("delivery", Text(reveal_hidden(said)))
            elif e.event == "withdrawn":  # who took it back, and their reason as typed (hidden characters shown)
                t.add_row("withdrawn", Text(reveal_hidden(f"by {e.actor}: {e.detail}")))
        if v.evidence:
            t.add_row("evidence", Text(f"(untrusted) {reveal_hidden(v.evidence)}", style="italic"))
        self.console.print(t)

    def seen(
        self,
        approval_id: str,
        entries: Sequence[AuditEntry] | Sequence[AuditView],
        decisions: Sequence[_Said] = (),
        *,
        verbose: bool = False,
    ) -> bool:
        """``hitl audit show``: each decision on the approval, its reason (from ``decisions``, the approval's), and
        the card its decider was shown as the audit keeps it, checked against the digest recorded beside it.
        ``verbose``: the digest and the renderer too. False when a recorded card does not match its digest."""
        views = [e if isinstance(e, AuditView) else AuditView.of(e) for e in entries]
        decided = [(v, seen_check(v)) for v in views if v.event == "decided"]
        reasons = decision_reasons([v.actor for v, _ in decided], decisions)
        intact = all(ok is not False for _, ok in decided)
        if self.json:
            rows = [
                {**v.model_dump(mode="json"), "view_checks": ok, "reason": reason}
                for (v, ok), reason in zip(decided, reasons, strict=True)
            ]
            self.emit({"approval_id": approval_id, "decisions": rows, "intact": intact})
            return intact
        if not decided:
            self.text((f"{approval_id}: no decision recorded", "dim"))
            return intact
        from rich.table import Table
        from rich.text import Text

        for (v, ok), reason in zip(decided, reasons, strict=True):
            self.text((v.at, "dim"), "  ", (v.actor, "bold"), f"  {v.detail}")
            t = Table.grid(padding=(0, 2))
            t.add_column(style="dim")
            t.add_column()
            t.add_row("saw", _saw(v, ok))
            if reason:
                t.add_row("reason given", Text(reveal_hidden(reason)))  # apart from an argument named reason
            if v.view is not None and ok is not None:
                if verbose:
                    renderer = str(v.view.get("renderer", "?"))
                    t.add_row("digest", Text(f"{v.view_digest} (view drawn by {renderer})"))
                t.add_row("about", Text(reveal_hidden(str(v.view.get("heading", "")))))
                _arguments(t, v.view)
                for why in v.view.get("reasons", []):
                    t.add_row("why", Text(str(why)))
                if v.view.get("outcome"):
                    t.add_row("outcome", Text(reveal_hidden(str(v.view["outcome"]))))
            self.console.print(t)
        return intact

    def pending(self, views: list[ApprovalView], *, waiting: int | None = None) -> None:
        """A page of pending approvals in their order, a compact list (``--json``: each as ``hitl show --json``):
        how many wait (``waiting``, when known), then two lines each, cut at the terminal's edge: the id and the
        sentence, marked ``!`` when an argument could fool the eye; its tier, why it ranks there (``ranked``) or
        when it expires, the votes, the role, and what to look closely at."""
        if self.json:
            self.emit({"pending": [approval_json(v) for v in views], "count": len(views), "waiting": waiting})
            return
        from rich.text import Text

        if waiting is not None and not views:
            self.text((waiting_text(waiting), "bold"))
        if not views:
            self.text(("no pending approvals", "dim"))
            return
        # The count first: how much waits on the reviewer (with --as), else how many this page lists.
        count = (
            waiting_text(waiting) if waiting is not None else f"{len(views)} pending approval{'s' * (len(views) != 1)}"
        )
        order = " · the most important first" if any(v.ranked for v in views) else " · the oldest first"
        self.text((count, "bold"), (order, "dim"))
        self.text(
            ("act on one: ", "dim"), "hitl resume ID --approve | --reject --reason TEXT", ("  ·  hitl show ID", "dim")
        )
        for v in views:
            look = _look_closely(v)
            view = v.view or {}
            about = reveal_hidden(str(view.get("headline") or v.tool))
            head = Text.assemble((v.id, "bold"), "  ", ("! " if look else "", "bold yellow"), about)
            when = v.ranked or f"{TIER_WORDS[v.tier]} · expires {v.expires_at}"
            detail = _fitted(
                [
                    [f"    {when}"],
                    [f" · ! {look}", " · ! look closely: hitl show ID"] if look else [],
                    [f" · {v.approvals} of {v.quorum} approvals"] if v.quorum > 1 else [],
                    [f" · role {v.required_role or 'any'}"],
                ],
                self.console.width,
            )
            for line in (head, detail):  # each whole or cut with "…": an approval is two lines at any width
                self.console.print(line, no_wrap=True, overflow="ellipsis", soft_wrap=False)

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
        from rich.text import Text

        # A detail can hold what a person typed (a withdrawal's reason): its hidden characters shown, never sent.
        shown = [(Text(reveal_hidden(v.actor)), Text(reveal_hidden(v.detail))) for v in views]
        rows: list[list[str | Text]] = [
            [v.at, v.event, actor, v.approval_id or "", str(v.version or ""), v.outcome, detail]
            for v, (actor, detail) in zip(views, shown, strict=True)
        ]
        self.table(("at", "event", "actor", "approval", "v", "outcome", "detail"), rows, narrow=_audit_lines)
