"""What a finished run leaves stored, on the run the cycle benchmark's "bytes per finished run" measures
(``bench/cycle``: prepare, an approval, finish; a new run each), pinned where it slipped (issue 62 item 8): the
approval's row on SQLite, its document on the SQL stores, its hash on Redis."""

from __future__ import annotations

import json
import sqlite3
import typing
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hitl.engine.domain.consequences import Consequence, ConsequenceOutcome
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status
from hitl.engine.domain.ranking import due_soon_at
from hitl.engine.domain.runs import RunStatus
from hitl.engine.ports import Store
from hitl.engine.runtime.compose import RunContext, compose
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.redis import RedisStore
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance import helpers
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock, make_approval
from tests.bound_decisions import bound_request

CYCLE = Path(__file__).resolve().parents[2] / "bench" / "cycle"
"""The benchmark's workflow and hitl.yaml: the run whose stored bytes the benchmarks page publishes."""


def cycle_context(store: Store, clock: FakeClock) -> RunContext:
    """The cycle benchmark's runner and service on ``store``."""
    wf = load_workflow(CYCLE / "workflow.yaml")
    return compose(store=store, clock=clock, config_path=str(CYCLE / "hitl.yaml"), workflow=wf, worker_id="test")


async def paused_run(ctx: RunContext) -> tuple[str, Approval]:
    """A new run of the cycle, paused on its approval: its id and the approval."""
    assert ctx.workflow is not None
    r = await ctx.runner.start(ctx.workflow, {})
    assert r.status is RunStatus.PAUSED and r.approval is not None
    return r.session_id, r.approval


async def finish(ctx: RunContext, run_id: str, approval: Approval) -> None:
    """Approve the run's approval as the benchmark does and resume the run to its end."""
    await ctx.service.decide(bound_request(approval, "U_OPS"))
    assert (await ctx.runner.resume(run_id)).status is RunStatus.COMPLETED


async def test_finished_approvals_fit_three_to_a_sqlite_page(tmp_path: Path, clock: FakeClock) -> None:
    """60 finished runs keep their approvals on 20 leaf pages of 4 KiB. The row of a plain approval had ~30 B
    to spare at three a page; the nulls of two fields added since (``supersedes``, ``consequence``) made it two
    a page, a third of every page empty: +683 B a finished run."""
    store = SqliteStore(tmp_path / "hitl.db")
    ctx = cycle_context(store, clock)
    for _ in range(60):
        await finish(ctx, *await paused_run(ctx))
    await store.close()
    with closing(sqlite3.connect(tmp_path / "hitl.db")) as db:
        pages = dict(
            db.execute("SELECT pagetype, count(*) FROM dbstat WHERE name = 'approvals' GROUP BY pagetype").fetchall()
        )
        statuses = db.execute("SELECT DISTINCT status FROM approvals").fetchall()
    assert statuses == [("executed",)]
    assert pages.get("leaf") == 20 and "overflow" not in pages, pages


async def stored_doc(store: Store, approval_id: str) -> dict[str, object]:
    """The approval's JSON document as the SQL store keeps it (SQLite: read by a connection of its own)."""
    if isinstance(store, SqliteStore):
        with closing(sqlite3.connect(store.path)) as db:
            row = db.execute("SELECT doc FROM approvals WHERE id = ?", (approval_id,)).fetchone()
        return dict(json.loads(row[0]))
    assert isinstance(store, PostgresStore)

    async def read(c: Any) -> str:
        return str(await c.fetchval("SELECT doc FROM approvals WHERE id = $1", approval_id))

    return dict(json.loads(await store.db.run(read, write=False)))


async def test_a_sql_document_leaves_out_the_fields_still_at_their_none_default(
    sql_store: Store, clock: FakeClock
) -> None:
    """The finished cycle's approval is stored without the nine fields it leaves at None (each null cost its
    name's bytes in every approval) and reads back as it was; those fields given values are stored and read back
    as given (their default never read instead)."""
    ctx = cycle_context(sql_store, clock)
    run_id, approval = await paused_run(ctx)
    await finish(ctx, run_id, approval)
    done = await sql_store.approvals.get(approval.id)
    unset = {"summary", "ratio", "consequence", "backup_role", "hand_on_at", "approved_args", "superseded_by"}
    unset |= {"supersedes", "reason"}
    assert all(getattr(done, name) is None for name in unset)
    assert done.status is Status.EXECUTED and done.required_role == "ops" and done.args_schema is not None
    doc = await stored_doc(sql_store, approval.id)
    assert not unset & set(doc), sorted(unset & set(doc))
    assert Approval.model_validate(doc) == done
    shown = Consequence(outcome=ConsequenceOutcome.SHOWN, summary="refunds 49 to order 78291")
    values = {"summary": "refund 49", "ratio": 1.5, "consequence": shown, "backup_role": "finance"}
    values |= {"hand_on_at": clock.now() + 60, "supersedes": "apr_OLDER", "reason": "asked again"}
    given = make_approval(now=clock.now()).model_copy(update=values)
    stored, created = await sql_store.approvals.create(given)
    assert created and await sql_store.approvals.get(given.id) == given == stored
    assert set(values) <= set(await stored_doc(sql_store, given.id))


def none_without_its_default(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[str]:
    """The fields of ``model`` and of every model it holds that can be None but whose default is not None (or which
    have none): a stored document leaving out their None would read back as something else."""
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, info in model.model_fields.items():
        held = [info.annotation, *typing.get_args(info.annotation)]
        held += [inner for outer in held for inner in typing.get_args(outer)]
        if type(None) in held and (info.is_required() or info.default is not None):
            found.append(f"{model.__name__}.{name}")
        for sub in held:
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                found += none_without_its_default(sub, seen)
    return found


async def test_a_sql_document_leaves_out_its_decisions_fields_still_at_their_none_default(
    sql_store: Store, clock: FakeClock
) -> None:
    """A decision's fields still None by default (``reason``, ``args``, ``acting_for``, ``consequence``,
    ``view_digest``: ~80 B, half of what a decide adds to a row packed three or five to a page, which made most
    decides rebalance a page) are left out of the stored document like the approval's own; those given a value are
    kept, and so is a None inside the arguments (data, not a field). The approval reads back as it was: every field
    of its models that can be None defaults to None."""
    assert none_without_its_default(Approval, set()) == []
    asked = make_approval(now=clock.now(), quorum=2, args={"order_id": "78291", "note": None})
    await sql_store.approvals.create(asked)
    first = helpers.cmd(asked, "U_ONE", reason="order checked", view={"title": "refund"})
    await sql_store.approvals.decide(first, now=clock.now())
    two = Reviewer(id="U_TWO", roles=frozenset({"support"}))
    second = first.model_copy(update={"reviewer": two, "expected_version": 2, "reason": None, "view": None})
    decided = await sql_store.approvals.decide(second, now=clock.now())
    assert decided.status is Status.APPROVED and len(decided.decisions) == 2
    doc = await stored_doc(sql_store, asked.id)
    stored = doc["decisions"]
    assert isinstance(stored, list)
    assert [sorted(d) for d in stored] == [
        ["at", "kind", "reason", "reviewer", "version", "via", "view_digest"],
        ["at", "kind", "reviewer", "version", "via"],
    ]
    assert doc["args"] == {"order_id": "78291", "note": None}
    assert Approval.model_validate(doc) == decided == await sql_store.approvals.get(asked.id)


async def test_the_due_soon_score_is_kept_by_its_index_alone_on_redis(
    redis_store: RedisStore, clock: FakeClock
) -> None:
    """An approval asked by a run's pause (the commit script) and one created alone (the create script) are in
    the due-soon index at when each becomes due soon, and leave it when decided; neither's hash holds a copy of
    the score (a 17th field doubled the hash's table: +176 B a finished approval)."""
    c, r = redis_store.conn, redis_store.conn.r
    ctx = cycle_context(redis_store, clock)
    run_id, asked = await paused_run(ctx)
    alone = make_approval(now=clock.now(), role="ops")
    await redis_store.approvals.create(alone)
    for a in (asked, alone):
        assert await r.zscore(c.soon_key, a.id) == due_soon_at(a)
        assert not await r.hexists(c.approval_key(a.id), "soon")
    await finish(ctx, run_id, asked)
    reject = helpers.cmd(alone, "U_OPS", DecisionKind.REJECT, roles=frozenset({"ops"}))
    await redis_store.approvals.decide(reject, now=clock.now())
    for a in (asked, alone):
        assert await r.zscore(c.soon_key, a.id) is None
        assert not await r.hexists(c.approval_key(a.id), "soon")
