"""``hitl stats``: the HITL metrics from the store, per tool and tier, over a period."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.options import JsonOpt, StoreOpt

if TYPE_CHECKING:
    from hitl.cli.output import Out
    from hitl.engine.domain.tally import TallyRow

__all__ = ["COLUMNS", "SELF_TIER", "stats"]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds == float("inf"):
        return "> 1w"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"<= {seconds / size:g}{unit}"
    return f"<= {seconds:g}s"


COLUMNS = (
    ("actions", "calls proposed"),
    ("auto%", "ran without a person"),
    ("asked", "a person was asked"),
    ("ok", "approved as asked"),
    ("edit", "modified, then approved"),
    ("no", "rejected"),
    ("exp", "expired unanswered"),
    ("corr%", "of decisions modified or rejected"),
    ("p50", "half of decisions took at most"),
    ("p90", "nine in ten took at most"),
)
"""The table's number columns, short enough for 80 columns, each with what it counts: the legend under the table
is made from this, so a column added here is explained there."""


def row_json(r: TallyRow) -> dict[str, Any]:
    """One row of ``hitl stats`` as JSON (with the fields renamed in 0.2 under their old names too, for one
    release)."""
    from hitl.engine.config.deprecations import RENAMED
    from hitl.engine.domain.tally import Outcome

    row = {
        "tool": r.tool,
        "tier": r.tier,
        "actions": r.actions,
        **{str(o): r.n(o) for o in Outcome},
        "autonomous_completion_rate": r.autonomous_rate,
        "correction_rate": r.correction_rate,
        "audit_yield": r.audit_yield,
        "practice_catch_rate": r.catch_rate,
        "intervention_latency": {
            "count": r.latency_count,
            "sum_seconds": r.latency_sum,
            "p50_seconds_at_most": r.latency_quantile(0.5),
            "p90_seconds_at_most": r.latency_quantile(0.9),
            "buckets": [{"le": "+Inf" if b == float("inf") else b, "count": n} for b, n in r.latency_buckets],
        },
        "first_interaction": {
            "count": r.buckets("first")[-1][1],
            "sum_seconds": r.counts.get("first_sum", 0.0),
            "p50_seconds_at_most": r.quantile("first", 0.5),
            "p90_seconds_at_most": r.quantile("first", 0.9),
        },
        "consequences": {  # the tool's consequence, computed before a person is asked: how it ended, how long
            "count": r.buckets("consequence")[-1][1],
            "sum_seconds": r.counts.get("consequence_sum", 0.0),
            "p50_seconds_at_most": r.quantile("consequence", 0.5),
            "p90_seconds_at_most": r.quantile("consequence", 0.9),
            **r.consequences,
        },
    }
    return row | {old: row[renamed.new] for old, renamed in RENAMED.items() if renamed.new in row}


SELF_TIER = "self"
"""The tier whose rows are a requester's confirmation of their own request, counted apart from reviewers'."""


def _self_confirmed(rows: list[TallyRow]) -> dict[str, int]:
    """How many ``self`` calls their requester confirmed (approved as asked or edited) and declined."""
    from hitl.engine.domain.tally import Outcome

    own = [r for r in rows if r.tier == SELF_TIER]
    return {
        "confirmed": sum(r.n(Outcome.APPROVED) + r.n(Outcome.MODIFIED) for r in own),
        "declined": sum(r.n(Outcome.REJECTED) for r in own),
    }


def _bands(rows: list[TallyRow]) -> list[TallyRow]:
    """The rows added up per rank band (the tier), the most important first: how soon each band is looked at and
    decided."""
    from hitl.engine.domain.tally import TallyRow

    order = {"escalate": 0, "approve": 1}
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        merged = out.setdefault(r.tier, {})
        for k, v in r.counts.items():
            merged[k] = merged.get(k, 0.0) + v
    return [TallyRow("(band)", t, c) for t, c in sorted(out.items(), key=lambda tc: (order.get(tc[0], 2), tc[0]))]


def stats(
    since: Annotated[str, typer.Option("--since", help="How far back: 90m, 24h, 7d, 30d.")] = "7d",
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """The HITL metrics from the store: autonomous completion, corrections, intervention latency.

    The table explains its columns under it: actions proposed; auto% ran without a person; asked; ok approved, edit
    modified, no rejected, exp expired; corr% of decisions that modified or rejected; p50/p90 decision latency
    (bucket bounds)."""

    from hitl.api.models import iso
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.domain.durations import parse_duration
    from hitl.engine.domain.tally import TallyRow, summarize
    from hitl.engine.runtime.process import open_runtime

    out = Out(as_json=as_json)
    try:
        window = parse_duration(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from None
    settings = CliSettings.resolve(store=store, config=None, reviewer=None)

    async def work() -> int:
        async with open_runtime(settings.runtime, read_only=True) as rt:
            now = rt.clock.now()
            rows = summarize(await rt.store.tallies.read(since=now - window, now=now))
            start = now - window
        # A requester's own confirmations (tier self) are counted apart: they are no reviewer's decisions.
        reviewed = [r for r in rows if r.tier != SELF_TIER]
        every = TallyRow(
            "(all)", "", {k: sum(r.counts.get(k, 0.0) for r in reviewed) for r in reviewed for k in r.counts}
        )
        bands = _bands(reviewed)
        own = _self_confirmed(rows)
        if out.json:
            out.emit(
                {
                    "since": iso(start),
                    "until": iso(now),
                    "rows": [row_json(r) for r in rows],
                    "all": row_json(every),
                    "bands": [row_json(b) for b in bands],
                    "self": own,
                }
            )
            return 0
        out.text(("since ", "dim"), iso(start), ("  until ", "dim"), iso(now))
        if not rows:
            out.text("nothing was proposed in this period")
            return 0
        _print_table(out, rows, every)
        if any(own.values()):
            out.text(
                ("self-confirmed ", "dim"),
                str(own["confirmed"]),
                ("  declined ", "dim"),
                str(own["declined"]),
                ("  (tier self: the requester's own answers, not in (all))", "dim"),
            )
        _print_measures(out, every, bands)
        _print_consequences(out, rows)
        _print_latency(out, every)
        return 0

    run_command(out, work)


def _print_table(out: Out, rows: list[TallyRow], every: TallyRow) -> None:
    """One row per tool and tier, then every row summed (``every``), and the columns explained under it."""
    from rich.text import Text

    from hitl.engine.domain.tally import Outcome

    # Short headings: the table fits an 80-column terminal with tool names whole (or turns into blocks).
    numbers = tuple(heading for heading, _ in COLUMNS)
    shown = (Outcome.ASKED, Outcome.APPROVED, Outcome.MODIFIED, Outcome.REJECTED, Outcome.EXPIRED)
    table: list[list[str | Text]] = [
        [
            Text(r.tool),
            Text(r.tier),
            str(r.actions),
            _pct(r.autonomous_rate),
            *(str(r.n(o)) for o in shown),
            _pct(r.correction_rate),
            _span(r.latency_quantile(0.5)),
            _span(r.latency_quantile(0.9)),
        ]
        for r in [*rows, every]
    ]
    out.table(("tool", "tier", *numbers), table, right=numbers)
    legend = [Text.assemble((heading, "bold"), f": {meaning}") for heading, meaning in COLUMNS]
    # Wrapped at words to the terminal's width (the rest of the output keeps its lines whole).
    out.console.print(Text.assemble(("columns ", "dim"), Text("; ").join(legend)), soft_wrap=False)


def _print_measures(out: Out, every: TallyRow, bands: list[TallyRow]) -> None:
    """The measures only some periods have (spot checks, practice approvals, hand-ons), and each band's latencies."""
    from hitl.engine.domain.tally import Outcome

    if every.n(Outcome.SPOT_CHECKED):
        out.text(
            ("spot checks ", "dim"),
            f"{every.n(Outcome.SPOT_CHECKED)}, flagged {every.n(Outcome.SPOT_FLAGGED)} ",
            ("(audit yield ", "dim"),
            _pct(every.audit_yield),
            (")", "dim"),
        )
    if every.n(Outcome.PRACTICE):
        out.text(
            ("practice approvals ", "dim"),
            f"{every.n(Outcome.PRACTICE)}, caught {every.n(Outcome.PRACTICE_CAUGHT)}, missed "
            f"{every.n(Outcome.PRACTICE_MISSED)} ",
            ("(caught ", "dim"),
            _pct(every.catch_rate),
            (")", "dim"),
        )
    if every.n(Outcome.HANDED_ON) or every.n(Outcome.UNDER_DELEGATION):
        out.text(
            ("handed on ", "dim"),
            str(every.n(Outcome.HANDED_ON)),
            ("  decisions under delegation ", "dim"),
            str(every.n(Outcome.UNDER_DELEGATION)),
        )
    for b in bands:
        if b.buckets("first")[-1][1] or b.latency_count:
            out.text(
                (f"{b.tier} band ", "bold"),
                ("first interaction p50 ", "dim"),
                _span(b.quantile("first", 0.5)),
                ("  decision p50 ", "dim"),
                _span(b.latency_quantile(0.5)),
            )


def _print_consequences(out: Out, rows: list[TallyRow]) -> None:
    """Per tool that has one: how many consequences were computed, how long they took and how they ended."""
    for r in rows:
        count = r.buckets("consequence")[-1][1]
        if not count:
            continue
        ended = " · ".join(f"{o.replace('_', ' ')} {n}" for o, n in r.consequences.items())
        out.text(
            ("consequence ", "bold"),
            f"{r.tool} ({r.tier}) {count}, ",
            ("p50 ", "dim"),
            _span(r.quantile("consequence", 0.5)),
            ("  p90 ", "dim"),
            _span(r.quantile("consequence", 0.9)),
        )
        out.text(("  ", "dim"), ended)


def _print_latency(out: Out, every: TallyRow) -> None:
    """Every decision's intervention latency, as a histogram of its buckets."""
    out.text(("intervention latency (all decisions)", "bold"))
    previous, widest = 0, max(1, every.latency_count)
    for bound, seen in every.latency_buckets:
        n, previous = seen - previous, seen
        bar = "#" * round(40 * n / widest)
        out.text((f"  {_span(bound):>8} ", "dim"), f"{n:>6} ", (bar, "cyan"))
