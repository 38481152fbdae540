"""SQLite schema, as ordered migrations (as on PostgreSQL): ``PRAGMA user_version`` records the last applied, and
each newer one is applied in order as the file opens, inside the ``BEGIN IMMEDIATE`` transaction that holds the
file's write lock (so two processes opening it at once apply each once), or by ``hitl migrate``.

Version 7 brings any earlier file (the versions before migrations were listed) up to the tables of :data:`SCHEMA`; a
change to the schema is appended as a new version (8: :data:`TRUST_GRANTS`; 9: approval kinds; 10:
:data:`ALERT_STATES`; 11: the view a decider saw, in the audit; 12: call holds; 13: one message for several
approvals; 14: the queue's rank; 15: hand-on to a backup role; 16: delegations; 17: receipts; 18: a window event's
prior stats; 19: when an approval becomes due soon; 20: whether an approval's receipt was spent or it was withdrawn
first; 21: the inbox's filters, :data:`FILTERS`; 22: five indexes no query reads, dropped), never made
by editing one that was released."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from hitl.engine.domain.models import Approval, kind_of_older
from hitl.engine.domain.ranking import rank_key

__all__ = [
    "ALERT_STATES",
    "DELEGATIONS",
    "DUE_SOON_AT",
    "FILTERS",
    "GRANTS_DROPPED",
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TRUST_GRANTS",
    "add_missing_columns",
]

SCHEMA_VERSION = 22

DUE_SOON_AT = "expires_at - max(600.0, (expires_at - created_at) / 10.0)"
"""The instant a pending approval becomes due soon (:func:`~hitl.engine.domain.ranking.due_soon_at`, the same
arithmetic on the same doubles) as SQL: the expression index of version 19, and what a query names to use it."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    required_role TEXT,
    requester TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_pending ON approvals (created_at, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_pending_role ON approvals (required_role, created_at, id)
    WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_due ON approvals (expires_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_by_time ON approvals (created_at, id);
CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals (status, created_at, id);

CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    action_hash TEXT NOT NULL,
    holder TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    lease_until REAL NOT NULL,
    result TEXT
);
CREATE INDEX IF NOT EXISTS claims_finished ON claims (lease_until) WHERE state IN ('succeeded', 'failed');

CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    updated_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS checkpoints_by_status ON checkpoints (status, run_id);
CREATE INDEX IF NOT EXISTS checkpoints_by_time ON checkpoints (updated_at) WHERE status NOT IN ('running', 'paused');

-- Who drives a run now: a lease the owner renews; a running run with no live lease is an orphan.
CREATE TABLE IF NOT EXISTS run_owners (
    run_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    lease_until REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS trust (
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (session_id, tool)
);

-- Holds an outside service put on a kind of call (Slack's Retry-After), honoured by every process on the file.
CREATE TABLE IF NOT EXISTS call_holds (
    key TEXT PRIMARY KEY,
    until REAL NOT NULL
) WITHOUT ROWID;

-- The stop switch: one order per scope (a tool, or '*'), kept until lifted.
CREATE TABLE IF NOT EXISTS halts (
    scope TEXT PRIMARY KEY,
    doc TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS windows (
    key TEXT NOT NULL,
    event_id TEXT NOT NULL,
    at REAL NOT NULL,
    amount REAL NOT NULL,
    PRIMARY KEY (key, event_id)
);
CREATE INDEX IF NOT EXISTS windows_by_time ON windows (key, at);

CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    event TEXT NOT NULL,
    approval_id TEXT,
    version INTEGER,
    action_hash TEXT,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev TEXT NOT NULL DEFAULT '',
    link TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_by_approval ON audit (approval_id, seq);
-- The chains retention keeps after removing their approval, by their last entry (the audit retention removes them).
CREATE TABLE IF NOT EXISTS kept_chains (
    approval_id TEXT PRIMARY KEY,
    last_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS kept_chains_by_time ON kept_chains (last_at);
-- Append-only: the database itself refuses to rewrite history.
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- Retention alone may remove entries: it writes a row here, deletes and removes the row in one transaction (the
-- purge entry it appends first names the anchor `hitl audit verify` checks); nothing else ever holds the permit.
CREATE TABLE IF NOT EXISTS audit_purge (permit INTEGER PRIMARY KEY);
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    WHEN NOT EXISTS (SELECT 1 FROM audit_purge)
    BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;

-- Each chain's head (entries and last link; '' names the chain of entries that belong to no approval), written by
-- the insert itself, so `hitl audit verify` notices a tail cut off a chain. Retention adjusts it when it removes.
CREATE TABLE IF NOT EXISTS audit_heads (
    chain TEXT PRIMARY KEY,
    length INTEGER NOT NULL,
    link TEXT NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS audit_head AFTER INSERT ON audit
    BEGIN
        INSERT INTO audit_heads (chain, length, link) VALUES (coalesce(NEW.approval_id, ''), 1, NEW.link)
        ON CONFLICT (chain) DO UPDATE SET length = length + 1, link = excluded.link;
    END;
-- Heads taken by `hitl audit head`, by the digest the operator keeps elsewhere (`hitl audit verify --head`).
CREATE TABLE IF NOT EXISTS audit_anchors (
    digest TEXT NOT NULL,
    chain TEXT NOT NULL,
    length INTEGER NOT NULL,
    link TEXT NOT NULL,
    PRIMARY KEY (digest, chain)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    consumer TEXT,
    claimed_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    done INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_open ON jobs (kind, id) WHERE done = 0;
CREATE INDEX IF NOT EXISTS jobs_done ON jobs (created_at) WHERE done = 1;

CREATE TABLE IF NOT EXISTS messages (
    approval_id TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    ts TEXT NOT NULL,
    UNIQUE (channel, ts)
);

CREATE TABLE IF NOT EXISTS tallies (
    hour INTEGER NOT NULL,
    tool TEXT NOT NULL,
    tier TEXT NOT NULL,
    field TEXT NOT NULL,
    n REAL NOT NULL,
    PRIMARY KEY (hour, tool, tier, field)
) WITHOUT ROWID;
"""


def _statements(script: str) -> list[str]:
    """Split a script into statements, keeping trigger bodies whole."""
    out, buf = [], ""
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out


def _execute(c: sqlite3.Connection, script: str) -> None:
    """Run ``script`` statement by statement in the migration's transaction (``executescript`` would commit it
    first)."""
    for stmt in _statements(script):
        c.execute(stmt)


def _to_7(c: sqlite3.Connection) -> None:
    """Any file older than version 7 (or a new one): its tables brought up to date, then what is missing created."""
    add_missing_columns(c)
    _execute(c, SCHEMA)


TRUST_GRANTS = """
CREATE TABLE IF NOT EXISTS trust_grants (
    session_id TEXT NOT NULL,
    requester TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (session_id, requester, tool)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trust_grants_by_until ON trust_grants (until);
"""
"""Version 8: a grant covers one requester in one session (it covered anyone in the session before)."""

GRANTS_DROPPED = "trust_dropped_at_upgrade"
"""The grants version 8 dropped, until the opening that applied it has audited each as ended (in its transaction:
:func:`~hitl.engine.storage.sqlite.upgrade.end_dropped_grants`)."""


def _to_8(c: sqlite3.Connection) -> None:
    """Trust grants bound to the requester they were given for. The grants of an older file named no requester,
    so they are dropped rather than guessed (each would have lapsed within ``trust_ttl`` anyway), each kept aside
    in :data:`GRANTS_DROPPED` for the opening to audit as ended once the audit table is this release's."""
    if c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'trust'").fetchone() is not None:
        c.execute(f"CREATE TABLE IF NOT EXISTS {GRANTS_DROPPED} (session_id, tool, granted_by, until)")
        c.execute(f"INSERT INTO {GRANTS_DROPPED} SELECT session_id, tool, granted_by, until FROM trust")
    c.execute("DROP TABLE IF EXISTS trust")
    _execute(c, TRUST_GRANTS)


def _to_9(c: sqlite3.Connection) -> None:
    """An approval's kind as a field of its document: each document an older hitl wrote gets the kind its old
    markers meant (read once, here, by :func:`~hitl.engine.domain.models.kind_of_older`), written by Python's
    JSON so every number stays exactly as it was."""
    rows = c.execute("SELECT id, doc FROM approvals WHERE json_extract(doc, '$.kind') IS NULL").fetchall()
    for approval_id, doc in rows:
        data = json.loads(doc)
        data["kind"] = str(kind_of_older(data))
        c.execute("UPDATE approvals SET doc = ? WHERE id = ?", (json.dumps(data, ensure_ascii=False), approval_id))


ALERT_STATES = """
CREATE TABLE IF NOT EXISTS alert_states (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
"""
"""Version 10: each alert's state in a table of its own (it was a record beside the runs, under ``alert:<name>``)."""


def _to_10(c: sqlite3.Connection) -> None:
    """Alert state moved out of the runs' table, where a run a caller named ``alert:<name>`` could overwrite it (and
    it could be read as a run). A record there that is not an alert's (a caller's run) stays where it is."""
    _execute(c, ALERT_STATES)
    where = "run_id LIKE 'alert:%' AND json_extract(data, '$.kind') = 'alert'"
    c.execute(
        "INSERT OR IGNORE INTO alert_states (name, version, data, updated_at) "
        f"SELECT substr(run_id, 7), version, data, updated_at FROM checkpoints WHERE {where}"
    )
    c.execute(f"DELETE FROM checkpoints WHERE {where}")


def _to_11(c: sqlite3.Connection) -> None:
    """A decision's audit entry keeps the view its decider saw: its digest and its canonical JSON (NULL in every
    older entry, whose link never covered them)."""
    columns = {r[1] for r in c.execute("PRAGMA table_info(audit)")}
    for column in ("view_digest", "view"):
        if column not in columns:  # a file whose version was set back by hand may have them
            c.execute(f"ALTER TABLE audit ADD COLUMN {column} TEXT")


def _to_12(c: sqlite3.Connection) -> None:
    """Holds an outside service put on a kind of call (Slack's ``Retry-After``), shared by every process."""
    c.execute("CREATE TABLE IF NOT EXISTS call_holds (key TEXT PRIMARY KEY, until REAL NOT NULL) WITHOUT ROWID")


def _to_13(c: sqlite3.Connection) -> None:
    """One message may show several approvals (a group card): a message's channel and ts are no longer unique to one
    approval, and are indexed to list the approvals one message shows. SQLite drops a constraint only by building
    the table again."""
    c.execute(
        "CREATE TABLE messages_13 (approval_id TEXT PRIMARY KEY, channel TEXT NOT NULL, ts TEXT NOT NULL) WITHOUT ROWID"
    )
    c.execute("INSERT INTO messages_13 (approval_id, channel, ts) SELECT approval_id, channel, ts FROM messages")
    c.execute("DROP TABLE messages")
    c.execute("ALTER TABLE messages_13 RENAME TO messages")
    c.execute("CREATE INDEX IF NOT EXISTS messages_by_ref ON messages (channel, ts)")


def _to_14(c: sqlite3.Connection) -> None:
    """The queue's rank (:func:`~hitl.engine.domain.ranking.rank_key`) as an indexed column, computed for every
    approval an older hitl wrote from its document (a pending one ranks by tier and deadline: no ratio was kept)."""
    columns = {r[1] for r in c.execute("PRAGMA table_info(approvals)")}
    if "rank" not in columns:
        c.execute("ALTER TABLE approvals ADD COLUMN rank INTEGER NOT NULL DEFAULT 0")
    rows = c.execute("SELECT id, doc FROM approvals WHERE status = 'pending'").fetchall()
    for approval_id, doc in rows:
        c.execute(
            "UPDATE approvals SET rank = ? WHERE id = ?", (rank_key(Approval.model_validate_json(doc)), approval_id)
        )
    c.execute("CREATE INDEX IF NOT EXISTS approvals_ranked ON approvals (rank, id) WHERE status = 'pending'")
    c.execute(
        "CREATE INDEX IF NOT EXISTS approvals_ranked_role ON approvals (required_role, rank, id) "
        "WHERE status = 'pending'"
    )


def _to_15(c: sqlite3.Connection) -> None:
    """An approval's backup role and when it is handed on to it, as columns: a backup reviewer's list finds what was
    handed on to them (an older hitl handed nothing on: both stay NULL)."""
    columns = {r[1] for r in c.execute("PRAGMA table_info(approvals)")}
    if "backup_role" not in columns:
        c.execute("ALTER TABLE approvals ADD COLUMN backup_role TEXT")
    if "hand_on_at" not in columns:
        c.execute("ALTER TABLE approvals ADD COLUMN hand_on_at REAL")
    c.execute(
        "CREATE INDEX IF NOT EXISTS approvals_backup ON approvals (backup_role, rank, id) "
        "WHERE status = 'pending' AND backup_role IS NOT NULL"
    )


DELEGATIONS = """
CREATE TABLE IF NOT EXISTS delegations (
    id TEXT PRIMARY KEY,
    delegator TEXT NOT NULL,
    until REAL NOT NULL,
    ended_at REAL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS delegations_open ON delegations (delegator, until) WHERE ended_at IS NULL;
"""


def _to_16(c: sqlite3.Connection) -> None:
    """Delegations of reviewer roles, kept after they end (an older hitl had none)."""
    _execute(c, DELEGATIONS)


RECEIPTS = """
CREATE TABLE IF NOT EXISTS receipts (
    jti TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    exp REAL NOT NULL,
    redeemed INTEGER NOT NULL DEFAULT 0,
    redemption TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS receipts_by_exp ON receipts (exp);
"""


def _to_17(c: sqlite3.Connection) -> None:
    """Receipts issued with execution claims, and their one use (an older hitl issued none)."""
    _execute(c, RECEIPTS)


def _to_18(c: sqlite3.Connection) -> None:
    """Each rolling-window event keeps the stats it found when it was first counted, so the same call asked again
    is judged as it was then (an older hitl's events have none, and are judged as the window stands)."""
    columns = {r[1] for r in c.execute("PRAGMA table_info(windows)")}
    for name, kind in (("prior_count", "INTEGER"), ("prior_total", "REAL")):
        if name not in columns:  # a file whose version was set back (as a test of older trails does) has them
            c.execute(f"ALTER TABLE windows ADD COLUMN {name} {kind}")


def _to_19(c: sqlite3.Connection) -> None:
    """When each pending approval becomes due soon, indexed (an expression of two columns every file has, so the
    index is built over the approvals an older hitl wrote too): the queue finds every one due soon, wherever its
    rank puts it, at the cost of those it reads."""
    c.execute(f"CREATE INDEX IF NOT EXISTS approvals_soon ON approvals ({DUE_SOON_AT}, id) WHERE status = 'pending'")


RECEIPT_APPROVALS = """
CREATE TABLE IF NOT EXISTS receipt_approvals (
    approval_id TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('spent', 'withdrawn')),
    at REAL NOT NULL
) WITHOUT ROWID;
"""


def _to_20(c: sqlite3.Connection) -> None:
    """Per approval, whether a receipt of it was spent first or it was withdrawn first (an older hitl withdrew
    none, and its spent receipts keep their own rows: an approval of those is told spent when withdrawn only
    through a receipt spent from now on)."""
    _execute(c, RECEIPT_APPROVALS)


FILTERS = """
CREATE INDEX IF NOT EXISTS approvals_by_tool ON approvals (tool, created_at, id);
CREATE INDEX IF NOT EXISTS approvals_by_tier ON approvals (tier, created_at, id);
CREATE INDEX IF NOT EXISTS approvals_by_requester ON approvals (requester, created_at, id);
CREATE INDEX IF NOT EXISTS approvals_decided ON approvals (created_at, id) WHERE status != 'pending';
CREATE TABLE IF NOT EXISTS approval_reviewers (
    reviewer TEXT NOT NULL,
    created_at REAL NOT NULL,
    approval_id TEXT NOT NULL,
    PRIMARY KEY (reviewer, created_at, approval_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO approval_reviewers (reviewer, created_at, approval_id)
    SELECT json_extract(d.value, '$.reviewer'), a.created_at, a.id
    FROM approvals AS a, json_each(a.doc, '$.decisions') AS d;
CREATE TRIGGER IF NOT EXISTS approval_reviewers_purged AFTER DELETE ON approvals BEGIN
    DELETE FROM approval_reviewers WHERE approval_id = old.id AND created_at = old.created_at
        AND reviewer IN (SELECT json_extract(d.value, '$.reviewer') FROM json_each(old.doc, '$.decisions') AS d);
END;
"""
"""The stored indexes of the inbox's filters (:meth:`~.approvals.SqliteApprovals.list_matching`): tool and tier
(columns written once, at the insert: indexed as expressions over the document, every ``UPDATE`` of it rewrote their
entries, two WAL pages a decide), requester, every decided approval, and who recorded a decision or vote on each (a
table the decide writes in its own transaction, filled from the documents already there; a purge's trigger removes
an approval's rows with it)."""


def _to_21(c: sqlite3.Connection) -> None:
    """The inbox's filters indexed (:data:`FILTERS`): a filtered page reads the rows it shows, not the history. The
    tool and tier of each approval an older hitl wrote are taken from its document before they are indexed."""
    columns = {r[1] for r in c.execute("PRAGMA table_info(approvals)")}
    for name in ("tool", "tier"):
        if name not in columns:
            c.execute(f"ALTER TABLE approvals ADD COLUMN {name} TEXT NOT NULL DEFAULT ''")
    c.execute("UPDATE approvals SET tool = json_extract(doc, '$.tool'), tier = json_extract(doc, '$.tier')")
    _execute(c, FILTERS)


def _to_22(c: sqlite3.Connection) -> None:
    """Indexes no query reads, dropped: each was one more entry every insert wrote and every decide rewrote (issue 62
    item 8: a WAL page each). ``approvals_by_status (status, created_at, id)`` answers for two:
    ``approvals_pending (created_at, id) WHERE status = 'pending'`` is its ``'pending'`` range, in the same order, and
    ``approvals_decided (created_at, id) WHERE status != 'pending'`` its other ranges, which the filtered listing
    reads merged (:attr:`~hitl.engine.storage.matching.MatchingDialect.merges_decided`). The three by role
    (``approvals_pending_role``, ``approvals_ranked_role``, ``approvals_backup``) no plan picks: a reviewer's queue
    asks for the approvals of no role, of their roles, or handed on to one of them, an ``OR`` that SQLite reads
    from the status or ranked index and filters (``tests/storage/test_sqlite_query_plans.py`` pins each plan)."""
    for index in (
        "approvals_pending",
        "approvals_decided",
        "approvals_pending_role",
        "approvals_ranked_role",
        "approvals_backup",
    ):
        c.execute(f"DROP INDEX IF EXISTS {index}")


MIGRATIONS: tuple[tuple[int, Callable[[sqlite3.Connection], None]], ...] = (
    (7, _to_7),
    (8, _to_8),
    (9, _to_9),
    (10, _to_10),
    (11, _to_11),
    (12, _to_12),
    (13, _to_13),
    (14, _to_14),
    (15, _to_15),
    (16, _to_16),
    (17, _to_17),
    (18, _to_18),
    (19, _to_19),
    (20, _to_20),
    (21, _to_21),
    (22, _to_22),
)
"""``(version, step)`` in order; each runs inside the opening transaction when ``user_version`` is below it."""
assert MIGRATIONS[-1][0] == SCHEMA_VERSION


def add_missing_columns(c: sqlite3.Connection) -> None:
    """Bring tables of an older schema up to this one before :data:`SCHEMA` runs (it only creates what is new)."""
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "checkpoints" in tables:
        columns = {r[1] for r in c.execute("PRAGMA table_info(checkpoints)")}
        if "status" not in columns:  # version 2 -> 3: the run status, indexed, for recovery scans
            c.execute("ALTER TABLE checkpoints ADD COLUMN status TEXT NOT NULL DEFAULT ''")
            c.execute("UPDATE checkpoints SET status = COALESCE(json_extract(data, '$.status'), '')")
    if "audit" in tables:
        columns = {r[1] for r in c.execute("PRAGMA table_info(audit)")}
        if "link" not in columns:  # version 2 -> 3: the audit chain (older entries stay unlinked)
            c.execute("ALTER TABLE audit ADD COLUMN prev TEXT NOT NULL DEFAULT ''")
            c.execute("ALTER TABLE audit ADD COLUMN link TEXT NOT NULL DEFAULT ''")
    if "audit" in tables and "audit_heads" not in tables:  # version 5 -> 6: chain heads, taken from the chains as
        # they are (what came before the upgrade is vouched for by its links alone)
        c.execute(
            "CREATE TABLE audit_heads (chain TEXT PRIMARY KEY, length INTEGER NOT NULL, link TEXT NOT NULL) "
            "WITHOUT ROWID"
        )
        c.execute(
            "INSERT INTO audit_heads (chain, length, link) SELECT coalesce(a.approval_id, ''), COUNT(*), "
            "(SELECT b.link FROM audit b WHERE b.approval_id IS a.approval_id ORDER BY b.seq DESC LIMIT 1) "
            "FROM audit a GROUP BY a.approval_id"
        )
    guard = c.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'audit_no_delete'").fetchone()
    if guard is not None and "audit_purge" not in guard[0]:  # version 4 -> 5: retention may remove, with a permit
        c.execute("DROP TRIGGER audit_no_delete")
