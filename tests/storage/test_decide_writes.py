"""What an approval's UPDATE costs on the SQL stores (issue 62 item 8, after the inbox's filters of issue 69 item 3):
a decide or a move rewrites the row and the indexes of the columns it changes, and nothing reads the document again.
The filters' tool and tier are columns written once, at the insert (indexed as expressions over the document, every
UPDATE of it rewrote their entries: two WAL pages a SQLite decide); who decided what is written by the decide itself
(a trigger on every UPDATE of the document parsed all of it again: ~35 µs of CPU a SQLite decide)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.decide import apply_decision
from hitl.engine.domain.models import Status
from hitl.engine.ports import Store
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.helpers import cmd
from hitl.testing import FakeClock, make_approval


async def _rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    """The rows of a query on the store's database (SQLite: by a connection of its own)."""
    if isinstance(store, SqliteStore):
        with closing(sqlite3.connect(store.path)) as db:
            return [tuple(r) for r in db.execute(sql).fetchall()]
    assert isinstance(store, PostgresStore)

    async def read(c: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await c.fetch(sql)]

    return list(await store.db.run(read, write=False))


async def _on_update(store: Store) -> tuple[list[str], list[str]]:
    """The triggers an UPDATE of an approval runs, and the definitions of the approvals' indexes that name the
    document."""
    if isinstance(store, SqliteStore):
        found = await _rows(store, "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'approvals'")
        triggers = [n for t, n, sql in found if t == "trigger" and "DELETE ON" not in sql.upper()]
        return triggers, [sql for t, _, sql in found if t == "index" and sql and "doc" in sql]
    triggers = await _rows(
        store,
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'approvals'::regclass AND NOT tgisinternal "
        "AND (tgtype & 16) <> 0",  # TRIGGER_TYPE_UPDATE
    )
    indexes = await _rows(store, "SELECT indexdef FROM pg_indexes WHERE tablename = 'approvals'")
    return [str(t[0]) for t in triggers], [str(i[0]) for i in indexes if "doc" in str(i[0])]


async def test_an_approvals_update_runs_no_trigger_and_rewrites_no_index_of_the_document(
    sql_store: Store, clock: FakeClock
) -> None:
    a = make_approval(now=clock.now(), key="u1", tool="refund")
    await sql_store.approvals.create(a)
    decided = await sql_store.approvals.decide(cmd(a, "U_A"), now=clock.now())
    assert decided.status is Status.APPROVED
    assert await _on_update(sql_store) == ([], [])
    # The filters read the columns the insert wrote, and the reviewer the decide wrote.
    assert await _rows(sql_store, f"SELECT tool, tier FROM approvals WHERE id = '{a.id}'") == [("refund", "approve")]
    for where in (ApprovalFilter(tool="refund", tier=a.tier), ApprovalFilter(reviewer="U_A", status="decided")):
        assert [x.id for x in (await sql_store.approvals.list_matching(where)).items] == [a.id], where
    # No trigger reads an inserted document either: the insert writes the reviewers of the decisions it holds.
    b = make_approval(now=clock.advance(1), key="u2", quorum=2)
    voted = apply_decision(b, cmd(b, "U_B"), clock.now())
    both = apply_decision(voted, cmd(voted, "U_C"), clock.now())
    assert both.status is Status.APPROVED
    await sql_store.approvals.create(both)
    for reviewer in ("U_B", "U_C"):
        found = await sql_store.approvals.list_matching(ApprovalFilter(reviewer=reviewer))
        assert [x.id for x in found.items] == [b.id], reviewer
