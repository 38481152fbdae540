"""Each pending and decided listing of the SQLite store reads an index in the listing's own order: no walk of the
table, no sort of what it read (issue 62 item 8). Schema 22 dropped ``approvals_pending`` and ``approvals_decided``,
two more entries every decide wrote: ``approvals_by_status (status, created_at, id)`` answers for both, the decided
history as one range of it per decided status, merged. Where SQLite's planner, with no statistics, would read every
pending row and sort them, the query names its index (``INDEXED BY``): those are pinned here too.

Each call goes through the store as any caller's does; SQLite's trace of the connection gives the statements it
ran, and ``EXPLAIN QUERY PLAN`` of each what it read.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from pathlib import Path

import pytest

from hitl.engine.domain.approval_filter import ApprovalFilter
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.helpers import cmd
from hitl.testing import FakeClock, make_approval

_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)")
_READ = re.compile(r"^(?:SCAN|SEARCH) (?:approvals|a)\b")
"""A plan line that reads the approvals table (a compound's arm or a subquery's scan aside)."""
_ROLES = frozenset({"support", "finance"})


async def _plans(store: SqliteStore, call: Callable[[], Awaitable[object]]) -> list[list[str]]:
    """The query plan of each ``SELECT`` ``call`` made on the store's connection."""
    seen: list[str] = []
    await store.db.run(lambda c: c.set_trace_callback(seen.append), write=False)
    try:
        await call()
    finally:
        await store.db.run(lambda c: c.set_trace_callback(None), write=False)
    selects = [sql for sql in seen if sql.lstrip().upper().startswith("SELECT")]
    with closing(sqlite3.connect(store.path)) as db:
        return [[str(row[3]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}")] for sql in selects]


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[SqliteStore]:
    """A store holding pending approvals of several roles and decided ones of several statuses."""
    made = SqliteStore(tmp_path / "plans.db")
    history = []
    for i in range(24):
        a = make_approval(now=clock.advance(1), key=f"p{i}", role=("support", "finance", None)[i % 3])
        await made.approvals.create(a)
        history.append(a)
    for i, a in enumerate(history[:12]):
        kind = DecisionKind.REJECT if i % 4 == 1 else DecisionKind.APPROVE
        await made.approvals.decide(cmd(a, "U_A", kind, roles=_ROLES, reason="no"), now=clock.now())
    yield made
    await made.close()


async def test_each_pending_and_decided_listing_reads_its_index_in_order(store: SqliteStore, clock: FakeClock) -> None:
    a, now = store.approvals, clock.now()
    after = (await a.list_pending(limit=2)).cursor
    ranked_after = (await a.list_pending(limit=2, order="rank")).cursor
    decided_after = (await a.list_matching(ApprovalFilter(status="decided"), limit=2)).cursor
    by_status = {"approvals_by_status"}
    cases: dict[str, tuple[Callable[[], Awaitable[object]], set[str]]] = {
        "queue, age order": (lambda: a.list_pending(limit=5), by_status),
        "queue, age order, after a cursor": (lambda: a.list_pending(limit=5, cursor=after), by_status),
        "queue, age order, a reviewer's": (
            lambda: a.list_pending(roles=_ROLES, exclude_requester="U_ME", limit=5, cursor=after, now=now),
            by_status,
        ),
        "queue, rank order": (lambda: a.list_pending(limit=5, order="rank"), {"approvals_ranked"}),
        "queue, rank order, a reviewer's, after a cursor": (
            lambda: a.list_pending(roles=_ROLES, limit=5, order="rank", cursor=ranked_after, now=now),
            {"approvals_ranked"},
        ),
        "count": (lambda: a.count_pending(), by_status),
        "count, a reviewer's": (lambda: a.count_pending(roles=_ROLES, exclude_requester="U_ME", now=now), by_status),
        "due soon": (lambda: a.list_due_soon(now=now), {"approvals_soon"}),
        "due to expire": (lambda: a.expire_due(now=now), {"approvals_due"}),
        "recent, pending": (lambda: a.list_recent(status=Status.PENDING), by_status),
        "filtered, pending": (lambda: a.list_matching(ApprovalFilter(status=Status.PENDING)), by_status),
        "filtered, rejected": (lambda: a.list_matching(ApprovalFilter(status=Status.REJECTED)), by_status),
        "filtered, decided": (lambda: a.list_matching(ApprovalFilter(status="decided")), by_status),
        "filtered, decided, after a cursor": (
            lambda: a.list_matching(ApprovalFilter(status="decided"), cursor=decided_after),
            by_status,
        ),
        "filtered, decided, by dates": (
            lambda: a.list_matching(ApprovalFilter(status="decided", created_from=now - 20, created_before=now)),
            by_status,
        ),
    }
    for name, (call, indexes) in cases.items():
        plans = await _plans(store, call)
        assert plans, name
        lines = [line for plan in plans for line in plan]
        reads = [line for line in lines if _READ.match(line)]
        assert reads and all(_INDEX.search(line) for line in reads), (name, lines)
        assert {m.group(1) for line in reads if (m := _INDEX.search(line))} == indexes, (name, lines)
        assert not [line for line in lines if "TEMP B-TREE" in line], (name, lines)


async def test_the_decided_history_is_one_status_range_per_decided_status_merged(store: SqliteStore) -> None:
    plans = await _plans(store, lambda: store.approvals.list_matching(ApprovalFilter(status="decided"), limit=5))
    ranges = [line for plan in plans for line in plan if _READ.match(line)]
    # Every status an approval is decided in (all but pending), each an equality on the status index.
    assert ranges == ["SEARCH a USING INDEX approvals_by_status (status=?)"] * (len(Status) - 1)
    assert any("MERGE (UNION ALL)" in line for plan in plans for line in plan)
