"""The retention horizons (validated, parsed as people write them), what a purge reports, the anchor a purge entry
names, and the background sweep's pace and failure handling."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.retention import (
    AUDIT_DEFAULT,
    DAY,
    LIVE_RUN_STATUSES,
    PURGE_EVENT,
    RECORDS_DEFAULT,
    Purged,
    Retention,
    anchor_of,
    purge_entry,
)
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import InvalidInput, NotFound
from hitl.engine.runtime.retention import RetentionSweep
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.helpers import cmd
from hitl.engine.testing.factories import make_approval
from hitl.testing import FakeClock


def test_horizons_parse_as_people_write_them() -> None:
    assert Retention.parse() == Retention(records=RECORDS_DEFAULT, audit=AUDIT_DEFAULT)
    assert Retention.parse("7d", "never") == Retention(records=7 * DAY, audit=None)
    assert Retention.parse("never", "never") == Retention(records=None, audit=None)
    assert Retention.parse("12h", "90d").describe() == "records 12h, audit 90d"
    assert Retention.parse("90s", "never").describe() == "records 90s, audit never"
    assert Retention.parse("90s", "1h").records_before(1000.0) == 910.0


@pytest.mark.parametrize(
    ("records", "audit", "says"),
    [
        ("soon", None, "retention: 'soon' is not a duration"),
        ("30d", "1d", "at least the records retention"),
        ("never", "400d", "at least the records retention"),
        ("0", None, "must be positive"),
    ],
)
def test_bad_horizons_are_refused_saying_what_to_write(records: str, audit: str | None, says: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Retention.parse(records, audit)
    assert says in err.value.message


def test_purge_reports_add_up_and_name_their_anchor() -> None:
    both = Purged(runs=1, approvals=2) + Purged(approvals=1, chains=3, audit_entries=9)
    assert both == Purged(runs=1, approvals=3, chains=3, audit_entries=9) and both.total == 16
    entry = purge_entry(both, anchor="ab" * 20, now=5.0, actor="cli:ops", retention=Retention())
    assert entry.event == PURGE_EVENT and entry.approval_id is None and anchor_of(entry) == "ab" * 20
    assert anchor_of(AuditEntry(at=1.0, actor="x", event="note", detail='{"anchor": "x"}')) is None
    assert anchor_of(entry.model_copy(update={"detail": "not json"})) is None


def test_live_run_statuses_are_the_runner_s_unended_ones() -> None:
    ended = {s for s in RunStatus if s.exit_code != 4 and s is not RunStatus.RUNNING}
    assert set(LIVE_RUN_STATUSES) == {str(s) for s in set(RunStatus) - ended}


async def test_the_sweep_purges_once_an_interval_and_survives_a_dead_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    store = SqliteStore(tmp_path / "s.db")
    try:
        a, _ = await store.approvals.create(make_approval(now=clock.now(), key="a"))
        await store.approvals.decide(cmd(a, "U1", DecisionKind.REJECT, reason="no"), now=clock.now())
        sweep = RetentionSweep(store, clock, Retention(records=600, audit=1200), actor="retention:r1", every=3600)
        clock.advance(601)
        with caplog.at_level(logging.INFO, logger="hitl.engine.runtime.retention"):
            await sweep.sweep()  # the first sweep purges at once
        assert "removed approvals 1" in caplog.text
        b, _ = await store.approvals.create(make_approval(now=clock.now(), key="b"))
        await store.approvals.decide(cmd(b, "U1", DecisionKind.REJECT, reason="no"), now=clock.now())
        clock.advance(601)
        await sweep.sweep()  # old enough, but within the hour since the last purge: not yet
        assert (await store.approvals.get(b.id)).id == b.id
        clock.advance(3000)
        await sweep.sweep()
        with pytest.raises(NotFound):
            await store.approvals.get(b.id)
        # Past the audit horizon (1200 s) by then: both chains and the first purge's entry; the second names them.
        assert [(e.event, e.actor) for e in await store.audit.entries()] == [(PURGE_EVENT, "retention:r1")]
        assert await store.audit.entries(approval_id=a.id) == await store.audit.entries(approval_id=b.id) == []
        assert (await store.audit.verify()) == (1, None)
    finally:
        await store.close()
    (tmp_path / "dir.db").mkdir()
    dead = SqliteStore(tmp_path / "dir.db")
    try:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hitl.engine.runtime.retention"):
            await RetentionSweep(dead, clock, Retention()).sweep()
        assert "retention could not purge" in caplog.text
    finally:
        await dead.close()
