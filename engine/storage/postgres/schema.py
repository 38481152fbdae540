"""The PostgreSQL schema, as ordered migrations: each applied once, in order, under an advisory lock.

Two replicas starting at once take the lock in turn: the first applies what is missing, the second finds it done.
``hitl_schema`` records each version applied. The audit table is append-only in the database itself (a trigger
refuses UPDATE, TRUNCATE and any DELETE but retention's, which holds the ``audit_purge`` permit in its own
transaction); the operations page shows the grants that keep even the service role from rewriting history.
"""

from __future__ import annotations

__all__ = ["DUE_SOON_AT", "GRANTS_DROPPED", "MIGRATIONS", "MIGRATION_LOCK"]

MIGRATION_LOCK = 0x6869746C  # "hitl": the advisory lock key migrations are applied under
GRANTS_DROPPED = "trust_dropped_at_upgrade"
"""The grants migration 4 dropped, until the opening has audited each as ended (:mod:`.upgrade`)."""
DUE_SOON_AT = "(expires_at - greatest(600::float8, (expires_at - created_at) / 10::float8))"
"""The instant a pending approval becomes due soon (:func:`~hitl.engine.domain.ranking.due_soon_at`, the same
arithmetic on the same doubles) as SQL: the expression migration 15 indexes, and what a query names to use it."""

_V1 = """
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    required_role TEXT,
    requester TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX approvals_pending ON approvals (created_at, id) WHERE status = 'pending';
CREATE INDEX approvals_pending_role ON approvals (required_role, created_at, id) WHERE status = 'pending';
CREATE INDEX approvals_due ON approvals (expires_at) WHERE status = 'pending';
CREATE INDEX approvals_by_time ON approvals (created_at, id);
CREATE INDEX approvals_by_status ON approvals (status, created_at, id);

CREATE TABLE claims (
    key TEXT PRIMARY KEY,
    action_hash TEXT NOT NULL,
    holder TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL,
    result TEXT
);
CREATE INDEX claims_finished ON claims (lease_until) WHERE state IN ('succeeded', 'failed');

CREATE TABLE checkpoints (
    run_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL DEFAULT ''
);
CREATE INDEX checkpoints_by_status ON checkpoints (status, run_id);
CREATE INDEX checkpoints_by_time ON checkpoints (updated_at) WHERE status NOT IN ('running', 'paused');

CREATE TABLE run_owners (
    run_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL
);

CREATE TABLE trust (
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    until DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, tool)
);

CREATE TABLE halts (
    scope TEXT PRIMARY KEY,
    doc TEXT NOT NULL
);

CREATE TABLE windows (
    key TEXT NOT NULL,
    event_id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (key, event_id)
);
CREATE INDEX windows_by_time ON windows (key, at);

CREATE TABLE audit (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
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
CREATE INDEX audit_by_approval ON audit (approval_id, seq);
CREATE TABLE kept_chains (
    approval_id TEXT PRIMARY KEY,
    last_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX kept_chains_by_time ON kept_chains (last_at);
CREATE TABLE audit_purge (permit INTEGER PRIMARY KEY);
CREATE FUNCTION hitl_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM audit_purge) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit log is append-only';
END
$$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION hitl_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION hitl_audit_append_only();
CREATE TABLE audit_heads (
    chain TEXT PRIMARY KEY,
    length INTEGER NOT NULL,
    link TEXT NOT NULL
);
CREATE TABLE audit_anchors (
    digest TEXT NOT NULL,
    chain TEXT NOT NULL,
    length INTEGER NOT NULL,
    link TEXT NOT NULL,
    PRIMARY KEY (digest, chain)
);

CREATE TABLE jobs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    approval_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    consumer TEXT,
    claimed_at DOUBLE PRECISION,
    attempts INTEGER NOT NULL DEFAULT 0,
    done BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX jobs_open ON jobs (kind, id) WHERE NOT done;
CREATE INDEX jobs_done ON jobs (created_at) WHERE done;

CREATE TABLE messages (
    approval_id TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    ts TEXT NOT NULL,
    UNIQUE (channel, ts)
);

CREATE TABLE tallies (
    hour BIGINT NOT NULL,
    tool TEXT NOT NULL,
    tier TEXT NOT NULL,
    field TEXT NOT NULL,
    n DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (hour, tool, tier, field)
);
"""

_V2 = """
-- A decision settles its approval's open jobs of one kind (JobQueue.settle): found by approval, not by scanning.
CREATE INDEX jobs_open_by_approval ON jobs (kind, approval_id) WHERE NOT done;
"""

_V3 = """
-- The guard of a write sent without BEGIN (writes.py): the rows its rules read are still as they were, or the
-- statement fails as a serialization failure and the call is run again from its read. The check and the write
-- are one transaction only at SERIALIZABLE: on a connection at any other level (a pooler that dropped the
-- setting hitl connects with), nothing is written.
CREATE FUNCTION hitl_unchanged(same boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'serializable' THEN
        RAISE EXCEPTION 'hitl writes at SERIALIZABLE, this connection runs at %',
            current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'let default_transaction_isolation = serializable reach the server (a pooler may drop it)';
    END IF;
    IF same IS NOT TRUE THEN
        RAISE EXCEPTION 'the rows this write was decided on changed since they were read'
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN true;
END
$$;
"""

_V4 = f"""
-- A trust grant covers one requester in one session (it covered anyone in the session before). The older grants
-- named no requester: they are dropped, not guessed (each would have lapsed within trust_ttl anyway), each kept
-- aside until the opening has audited it as ended (upgrade.py, on this release's audit tables).
CREATE TABLE {GRANTS_DROPPED} AS SELECT session_id, tool, granted_by, until FROM trust;
DROP TABLE trust;
CREATE TABLE trust_grants (
    session_id TEXT NOT NULL,
    requester TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    until DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, requester, tool)
);
CREATE INDEX trust_grants_by_until ON trust_grants (until);
"""

_V5 = """
-- An approval's kind is a field of its document. Documents an older hitl wrote marked it in metadata (practice,
-- spot checks) or by a tool-name prefix (doubt:, gate:, review:); each gets the kind those markers meant.
UPDATE approvals SET doc = jsonb_set(doc::jsonb, '{kind}', to_jsonb(CASE
        WHEN doc::jsonb #>> '{metadata,kind}' IN ('practice', 'spot_check') THEN doc::jsonb #>> '{metadata,kind}'
        WHEN left(doc::jsonb ->> 'tool', 6) = 'doubt:' THEN 'doubt'
        WHEN left(doc::jsonb ->> 'tool', 5) = 'gate:' THEN 'gate'
        WHEN left(doc::jsonb ->> 'tool', 7) = 'review:' THEN 'review'
        ELSE 'action' END))::text
    WHERE NOT (doc::jsonb ? 'kind');
"""

_V6 = """
-- Each alert's state in a table of its own: it was a record beside the runs (run id 'alert:<name>'), where a run a
-- caller named so could overwrite it, and it could be read as a run. A caller's own run there stays where it is.
CREATE TABLE alert_states (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
INSERT INTO alert_states (name, version, data, updated_at)
    SELECT substr(run_id, 7), version, data, updated_at FROM checkpoints
    WHERE run_id LIKE 'alert:%' AND data::jsonb ->> 'kind' = 'alert';
DELETE FROM checkpoints WHERE run_id LIKE 'alert:%' AND data::jsonb ->> 'kind' = 'alert';
"""

_V7 = """
-- A decision's audit entry keeps the view its decider saw: its digest and its canonical JSON (NULL in every older
-- entry, whose link never covered them).
ALTER TABLE audit ADD COLUMN IF NOT EXISTS view_digest TEXT, ADD COLUMN IF NOT EXISTS view TEXT;
"""

_V8 = """
-- Holds an outside service put on a kind of call (Slack's Retry-After), honoured by every replica.
CREATE TABLE IF NOT EXISTS call_holds (
    key TEXT PRIMARY KEY,
    until DOUBLE PRECISION NOT NULL
);
"""

_V9 = """
-- One message may show several approvals (a group card): a message's channel and ts are no longer unique to one
-- approval, and are indexed to list the approvals one message shows.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_channel_ts_key;
CREATE INDEX IF NOT EXISTS messages_by_ref ON messages (channel, ts);
"""

_V10 = """
-- The queue's rank (hitl.engine.domain.ranking.rank_key) as an indexed column: the tier band, how far over its
-- threshold (none was kept before: 0), and the deadline in whole seconds, as the one integer Python computes.
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS rank BIGINT NOT NULL DEFAULT 0;
UPDATE approvals SET rank =
    ((3 - CASE doc::jsonb ->> 'tier'
        WHEN 'escalate' THEN 3 WHEN 'approve' THEN 2 WHEN 'notify' THEN 1 ELSE 0 END)::bigint << 49)
    | ((131071 - least(greatest(round(coalesce((doc::jsonb ->> 'ratio')::float8, 0) * 100), 0), 131071))::bigint << 32)
    | least(greatest(floor(expires_at), 0), 4294967295)::bigint
    WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_ranked ON approvals (rank, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_ranked_role ON approvals (required_role, rank, id) WHERE status = 'pending';
"""

_V11 = """
-- An approval's backup role and when it is handed on to it: a backup reviewer's list finds what was handed on to
-- them (an older hitl handed nothing on: both stay NULL).
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS backup_role TEXT, ADD COLUMN IF NOT EXISTS hand_on_at DOUBLE PRECISION;
CREATE INDEX IF NOT EXISTS approvals_backup ON approvals (backup_role, rank, id)
    WHERE status = 'pending' AND backup_role IS NOT NULL;
"""

_V12 = """
-- Delegations of reviewer roles, kept after they end (the audit names them by id).
CREATE TABLE IF NOT EXISTS delegations (
    id TEXT PRIMARY KEY,
    delegator TEXT NOT NULL,
    given_at DOUBLE PRECISION NOT NULL,
    until DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS delegations_open ON delegations (delegator, until) WHERE ended_at IS NULL;
"""

_V13 = """
-- Receipts issued with execution claims (each written in its claim's transaction), and their one use.
CREATE TABLE IF NOT EXISTS receipts (
    jti TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    exp DOUBLE PRECISION NOT NULL,
    redeemed BOOLEAN NOT NULL DEFAULT false,
    redemption TEXT
);
CREATE INDEX IF NOT EXISTS receipts_by_exp ON receipts (exp);
"""

_V14 = """
-- Each rolling-window event keeps the stats it found when it was first counted (an older hitl's have none).
ALTER TABLE windows ADD COLUMN IF NOT EXISTS prior_count BIGINT;
ALTER TABLE windows ADD COLUMN IF NOT EXISTS prior_total DOUBLE PRECISION;
"""

_V15 = f"""
-- When each pending approval becomes due soon, indexed (an expression of two columns every database has, so it is
-- built over the approvals an older hitl wrote too): the queue finds every one due soon, wherever its rank puts it.
CREATE INDEX IF NOT EXISTS approvals_soon ON approvals ({DUE_SOON_AT}, id) WHERE status = 'pending';
"""

_V16 = """
-- Per approval, whether a receipt of it was spent first or it was withdrawn first (one row both decide on).
CREATE TABLE IF NOT EXISTS receipt_approvals (
    approval_id TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('spent', 'withdrawn')),
    at DOUBLE PRECISION NOT NULL
);
"""

_READABLE = "replace(doc, '\\u0000', '\\ufffd')::json"
"""An approval's document as JSON PostgreSQL can read fields of, NUL escapes or not (migration 17's backfill)."""

_V17 = f"""
-- The inbox's filters, indexed: tool and tier (columns the insert writes and no UPDATE touches, taken from the
-- document for the rows already there; as expressions over the document, every UPDATE of it rewrote their entries),
-- requester, every decided approval, and who recorded a decision or vote on each (a table the decide writes in its
-- own statement, filled from the documents already there; purged with its approval).
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS tool TEXT NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS tier TEXT NOT NULL DEFAULT '';
-- A document may hold an escaped NUL (one in an argument), which PostgreSQL will not turn into text, json or jsonb
-- alike: the fields are read from a copy with each escape replaced by U+FFFD's (six characters for six, so the copy
-- stays valid JSON; tool, tier and reviewer ids never hold a NUL).
UPDATE approvals SET tool = ({_READABLE}) ->> 'tool', tier = ({_READABLE}) ->> 'tier';
-- No default from here on: an insert that names no tool or tier fails rather than hides its row from the filters.
ALTER TABLE approvals ALTER COLUMN tool DROP DEFAULT, ALTER COLUMN tier DROP DEFAULT;
CREATE INDEX IF NOT EXISTS approvals_by_tool ON approvals (tool, created_at, id);
CREATE INDEX IF NOT EXISTS approvals_by_tier ON approvals (tier, created_at, id);
CREATE INDEX IF NOT EXISTS approvals_by_requester ON approvals (requester, created_at, id);
CREATE INDEX IF NOT EXISTS approvals_decided ON approvals (created_at, id) WHERE status <> 'pending';
CREATE TABLE IF NOT EXISTS approval_reviewers (
    reviewer TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    approval_id TEXT NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
    PRIMARY KEY (reviewer, created_at, approval_id)
);
CREATE INDEX IF NOT EXISTS approval_reviewers_of ON approval_reviewers (approval_id);
INSERT INTO approval_reviewers (reviewer, created_at, approval_id)
    SELECT DISTINCT d ->> 'reviewer', a.created_at, a.id
    FROM approvals AS a, json_array_elements(({_READABLE.replace("(doc", "(a.doc")}) -> 'decisions') AS d
    ON CONFLICT DO NOTHING;
"""

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6),
    (7, _V7),
    (8, _V8),
    (9, _V9),
    (10, _V10),
    (11, _V11),
    (12, _V12),
    (13, _V13),
    (14, _V14),
    (15, _V15),
    (16, _V16),
    (17, _V17),
)
"""``(version, SQL)`` in order. A new version is appended, never edited once released."""
