"""How much a CLI resume reads: each operation loads the approval and the run once and passes them down.

``hitl resume <approval> --approve`` through the real CLI, in-process, with the store's reads counted where they
happen (the SQLite store's own methods). The workflow file is read once per check too: there is no process-wide
cache to hide a second read behind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.storage.sqlite.approvals import SqliteApprovals
from hitl.engine.storage.sqlite.journal import SqliteJournal
from hitl.engine.storage.sqlite.runs import SqliteRuns
from tests.cli.conftest import REFUND, Cli
from tests.cli.test_refund_cli import run_refund


def _counted(reads: Counter[str], name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    async def counting(*args: Any, **kwargs: Any) -> Any:
        reads[name] += 1
        return await method(*args, **kwargs)

    return counting


def test_a_cli_resume_reads_the_approval_and_the_run_once_each(
    cli: Cli, shop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    paused = run_refund(cli)
    reads: Counter[str] = Counter()
    monkeypatch.setattr(SqliteApprovals, "get", _counted(reads, "approval", SqliteApprovals.get))
    monkeypatch.setattr(SqliteRuns, "load", _counted(reads, "run", SqliteRuns.load))
    monkeypatch.setattr(SqliteJournal, "open", _counted(reads, "run (taken over)", SqliteJournal.open))
    read_text = Path.read_text

    def reading(path: Path, *args: Any, **kwargs: Any) -> str:
        if path.resolve() == REFUND.resolve():
            reads["workflow file"] += 1
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", reading)

    done = cli("resume", str(paused["approval_id"]), "--approve", "--as", "U_SUPPORT1", "--json")
    assert done.code == 0, (done.out, done.err)
    assert done.json()["status"] == "completed"
    print(dict(reads))  # noqa: T201 (read with -s)
    assert reads["approval"] == 1, reads
    assert reads["run"] == 1, reads
    assert reads["run (taken over)"] == 1, reads  # resuming takes the run over: ownership and checkpoint, one read
    assert reads["workflow file"] == 1, reads
