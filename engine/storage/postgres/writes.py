"""What one transaction reads and writes, each in one statement: a round trip per phase, not one per row.

A transaction of the PostgreSQL store reads what its rules need (:func:`read_state`: the run's owner and checkpoint
version, claims, approvals, audit chain heads, by key, in one ``SELECT``), decides in Python with the same domain
rules the other stores use, and sends what it decided as one statement of data-modifying ``WITH`` parts
(:class:`Writes`). Inside a ``SERIALIZABLE`` transaction that is as safe as a statement per row: the read takes the
same predicate locks, and the writes land together or not at all. The hot calls go further and send the two
statements without ``BEGIN`` or ``COMMIT``: the write is *guarded*, it first recomputes a digest of the rows the read
found and fails whole, as a serialization failure, when they changed in between (the call runs again from its read);
every statement on the store's connections is a ``SERIALIZABLE`` transaction of its own, so check and writes are
one. On a local server a round trip costs about as much client CPU as the rest of a step boundary, so the
statements, not the rows, set the price of a commit.

The parts of one statement see the same snapshot and may not touch one row twice, so :class:`Writes` keeps the last
state of each row (an approval inserted and then moved is inserted in its final state) and works each audit chain's
links forward in Python from the head it read.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from hitl.engine.domain.audit_heads import Head
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, Claim, TrustGrant, chain_link, entry_body
from hitl.engine.receipts.claims import Issued
from hitl.engine.storage.codec import (
    APPROVAL_COLUMNS,
    AUDIT_COLUMNS,
    approval_doc,
    approval_row,
    audit_values,
    claim_of,
    claim_row,
    dumps,
    encode_json_form,
    reviewer_rows,
)
from hitl.engine.storage.postgres.connection import Conn

__all__ = ["State", "Writes", "read_state", "state_digest_sql", "state_sql"]


def state_sql(
    run: str, claims: Sequence[str], approvals: Sequence[str], chains: Sequence[str], withdrawals: Sequence[str] = ()
) -> str:
    """The rows a transaction's rules look at, as one row, given the placeholders of the run's id and of each claim
    key, approval id, audit chain and receipts' approval named: the run's owner, its lease, its checkpoint version,
    then for each name in order its claim, approval document, chain head or receipts' state (``spent`` or
    ``withdrawn``; null when absent). Each row is looked up by its key with
    ``=``: an index lookup in any plan (generic plans included), so a ``SERIALIZABLE`` read locks the rows it
    read, not their neighbours' pages."""

    def each(items: Sequence[str], select: str, kind: str) -> str:
        if not items:
            return f"NULL::{kind}"
        if kind == "json":
            return "json_build_array(" + ", ".join(f"({select.format(p)})" for p in items) + ")"
        return "ARRAY[" + ", ".join(f"({select.format(p)})" for p in items) + "]::text[]"

    claim = "SELECT json_build_array(key, action_hash, holder, attempt, state, lease_until, result) FROM claims "
    return (
        f"SELECT (SELECT holder FROM run_owners WHERE run_id = {run}) AS owner, "
        f"(SELECT lease_until FROM run_owners WHERE run_id = {run}) AS owned_until, "
        f"(SELECT version FROM checkpoints WHERE run_id = {run}) AS version, "
        f"{each(claims, claim + 'WHERE key = {}', 'json')} AS claims, "
        f"{each(approvals, 'SELECT doc FROM approvals WHERE id = {}', 'text[]')} AS approvals, "
        f"{each(chains, 'SELECT json_build_array(chain, length, link) FROM audit_heads WHERE chain = {}', 'json')} "
        f"AS heads, {each(withdrawals, 'SELECT state FROM receipt_approvals WHERE approval_id = {}', 'text[]')} "
        "AS withdrawals"
    )


def state_digest_sql(
    run: str, claims: Sequence[str], approvals: Sequence[str], chains: Sequence[str], withdrawals: Sequence[str] = ()
) -> str:
    """An expression: the digest of :func:`state_sql`'s row."""
    return f"(SELECT md5(s::text) FROM ({state_sql(run, claims, approvals, chains, withdrawals)}) s)"


def _places(first: int, *counts: int) -> tuple[str, list[str], list[str], list[str], list[str]]:
    """Placeholders from ``$first``: the run's, then one per claim key, approval id, chain and receipts' approval."""
    n = itertools.count(first)
    run = f"${next(n)}"
    claims, approvals, chains, withdrawals = ([f"${next(n)}" for _ in range(k)] for k in counts)
    return run, claims, approvals, chains, withdrawals


@functools.lru_cache(maxsize=256)
def _read_sql(claims: int, approvals: int, chains: int, withdrawals: int) -> str:
    """:func:`read_state`'s statement for that many names (built once per shape: it is on every call's path).
    MATERIALIZED: the row is computed once (inlined, each lookup would run again for the digest)."""
    state = state_sql(*_places(1, claims, approvals, chains, withdrawals))
    return f"WITH s AS MATERIALIZED ({state}) SELECT s.*, md5(s::text) FROM s"


@functools.lru_cache(maxsize=256)
def _guard_sql(first: int, claims: int, approvals: int, chains: int, withdrawals: int) -> str:
    """The guard of a write whose state's names take the placeholders from ``$first`` on, its digest the next."""
    digest = f"${first + 1 + claims + approvals + chains + withdrawals}"
    places = _places(first, claims, approvals, chains, withdrawals)
    return f"hitl_unchanged({state_digest_sql(*places)} = {digest})"


@dataclass
class State:
    """The rows a transaction's rules look at, as they were when it read them (absent rows are absent)."""

    owner: str | None = None
    """The run's owner, and :attr:`owned_until`: when its lease runs out."""
    owned_until: float | None = None
    version: int | None = None
    """The run's checkpoint version (None: no checkpoint)."""
    claims: dict[str, Claim] = field(default_factory=dict)
    approvals: dict[str, Approval] = field(default_factory=dict)
    heads: dict[str, Head | None] = field(default_factory=dict)
    """Every chain asked for: its head, or None when it has no entries yet."""
    withdrawn: set[str] = field(default_factory=set)
    """The approvals asked for (``withdrawals``) that were withdrawn: none of their receipts is issued."""
    read: tuple[str | None, list[str], list[str], list[str], list[str], str] = (None, [], [], [], [], "")
    """What was read (the run, claims, approvals, chains and receipts' approvals named) and the digest of what was
    found: a write sent without a transaction is guarded by it (:meth:`Writes.send`)."""


async def read_state(
    c: Conn,
    *,
    run_id: str | None = None,
    claims: Collection[str] = (),
    approvals: Collection[str] = (),
    chains: Collection[str] = (),
    withdrawals: Collection[str] = (),
) -> State:
    """Read, in one statement, run ``run_id``'s owner and checkpoint version, the claims under ``claims``, the
    approvals ``approvals``, the heads of the audit ``chains`` and which of the approvals ``withdrawals`` were
    withdrawn (pass them to :class:`Writes`)."""
    named = (sorted(claims), sorted(approvals), sorted(chains), sorted(withdrawals))
    row = await c.fetchrow(_read_sql(*map(len, named)), run_id, *named[0], *named[1], *named[2], *named[3])
    assert row is not None  # scalar subqueries: always one row
    found = State(owner=row[0], owned_until=row[1], version=row[2], read=(run_id, *named, row[7]))
    for got in json.loads(row[3]) if row[3] else ():
        if got is not None:
            key, *values = got
            found.claims[key] = claim_of(key, values)
    for doc in row[4] or ():
        if doc is not None:
            a = Approval.model_validate_json(doc)
            found.approvals[a.id] = a
    found.heads = dict.fromkeys(chains)
    for got in json.loads(row[5]) if row[5] else ():
        if got is not None:
            found.heads[got[0]] = (int(got[1]), str(got[2]))
    found.withdrawn = {a for a, state in zip(named[3], row[6] or (), strict=True) if state == "withdrawn"}
    return found


class Writes:
    """The writes of one transaction, collected, then sent as one statement by :meth:`send`.

    Args:
        state: what the writes were decided on, when it was read by :func:`read_state` (its audit chain heads are
            used; the heads of other chains an entry is added to are read by :meth:`send` first).
        guarded: the writes are sent outside a transaction, after ``state`` was read in a statement of its own:
            the statement that writes them first checks that the rows ``state`` read are still as they were,
            and fails as a serialization failure if not (the caller runs again from its read). The connection's
            default isolation is ``SERIALIZABLE``, so that check and the writes are one serializable transaction.
    """

    def __init__(self, state: State | None = None, *, guarded: bool = False) -> None:
        if guarded and state is None:
            raise ValueError("a guarded write needs the state it was decided on")
        self._state = state
        self._guarded = guarded
        self._heads: dict[str, Head | None] = dict(state.heads) if state is not None else {}
        self._approvals: dict[str, tuple[Approval, bool]] = {}
        self._reviewers: list[tuple[str, float, str]] = []
        self._claims: dict[str, Claim] = {}
        self._audit: list[AuditEntry] = []
        self._jobs: list[tuple[str, str, str | None, float]] = []
        self._checkpoint: tuple[str, int, str, float, str] | None = None
        self._owner: tuple[str, str, float] | None = None
        self._release: tuple[str, str | None] | None = None
        self._grants: list[TrustGrant] = []
        self._receipts: list[Issued] = []

    # -- collecting -------------------------------------------------------------------------------------
    def approval(self, a: Approval, *, insert: bool = False) -> None:
        """Write approval ``a`` (``insert``: a new row); a later write of the same approval replaces it."""
        inserted = insert or (a.id in self._approvals and self._approvals[a.id][1])
        self._approvals[a.id] = (a, inserted)

    def reviewers(self, rows: Collection[tuple[str, float, str]]) -> None:
        """Add rows to the index of who decided what (``approval_reviewers``: reviewer, the approval's creation time,
        its id; one already there is kept): a decide's own decision (an inserted approval's are added for it)."""
        self._reviewers += rows

    def claim(self, cl: Claim, *, receipt: Issued | None = None) -> None:
        """Write the execution claim ``cl`` (inserted or replaced), and ``receipt``, issued with it, when the claim
        is a new attempt (not one recovered from a holder that stopped), with its audit entry."""
        self._claims[cl.key] = cl
        if receipt is not None and not cl.recovered:
            self._receipts.append(receipt)
            if receipt.audit is not None:
                self.audit(receipt.audit)

    def audit(self, e: AuditEntry) -> None:
        """Append ``e`` to its chain (its approval's, or the one for entries that belong to no approval)."""
        self._audit.append(e)

    def job(self, kind: str, payload: dict[str, Any], now: float) -> None:
        """Queue a durable job."""
        approval_id = payload.get("approval_id")
        self._jobs.append((kind, dumps(payload), str(approval_id) if approval_id is not None else None, now))

    def grant(self, g: TrustGrant) -> None:
        """Write trust grant ``g`` (replacing the same requester's grant of the tool in the session)."""
        self._grants.append(g)

    def checkpoint(self, run_id: str, version: int, data: dict[str, Any], now: float) -> None:
        """Save run ``run_id``'s checkpoint at ``version``."""
        self._checkpoint = (run_id, version, encode_json_form(data), now, str(data.get("status", "")))

    def own(self, run_id: str, holder: str, until: float) -> None:
        """Make ``holder`` the owner of run ``run_id`` until ``until``."""
        self._owner = (run_id, holder, until)

    def release(self, run_id: str, holder: str) -> None:
        """Give up ``holder``'s ownership of run ``run_id`` (after any :meth:`own` of this transaction)."""
        # Owned and released in one transaction: the row is gone whoever held it before.
        self._release = (run_id, None if self._owner is not None else holder)
        self._owner = None

    @property
    def changed(self) -> list[str]:
        """The approvals written (their waiters are woken by the ``NOTIFY`` sent on commit)."""
        return list(self._approvals)

    # -- sending ----------------------------------------------------------------------------------------
    async def send(self, c: Conn) -> None:
        """Send everything collected, as one statement (two when an audit chain's head was not read yet)."""
        stmt = _Statement()
        self._approval_parts(stmt)
        self._claim_parts(stmt)
        if self._receipts:
            rows = [(r.jti, r.key, r.exp) for r in self._receipts]
            stmt.parts.append(
                "INSERT INTO receipts (jti, key, exp) SELECT * FROM unnest("
                + stmt.columns(rows, ("text", "text", "float8"))
                + ")"
            )
        if self._audit:
            await self._read_heads(c)  # nothing to read when guarded: all its chains were read with its state
            self._audit_parts(stmt)
        self._job_and_grant_parts(stmt)
        self._run_parts(stmt)
        if not stmt.parts:
            return
        arg, args = stmt.arg, stmt.args
        # Announced on commit (and only if it commits): new approvals to the card poster, every change to waiters.
        created = [a.id for a, insert in self._approvals.values() if insert]
        main = (
            "SELECT (SELECT count(pg_notify(current_schema() || '_hitl_created', x)) FROM "
            f"unnest({arg(created)}::text[]) x), (SELECT count(pg_notify(current_schema() || '_hitl_changed', x)) "
            f"FROM unnest({arg(self.changed)}::text[]) x)"
            if self._approvals
            else "SELECT 1"
        )
        if self._guarded:
            assert self._state is not None
            run, claims, approvals, chains, withdrawals, digest = self._state.read
            first = len(args) + 1
            args += [run, *claims, *approvals, *chains, *withdrawals, digest]
            main += f", {_guard_sql(first, len(claims), len(approvals), len(chains), len(withdrawals))}"
        with_parts = ", ".join(f"w{i} AS ({p})" for i, p in enumerate(stmt.parts))
        await c.execute(f"WITH {with_parts} {main}", *args)

    def _approval_parts(self, stmt: _Statement) -> None:
        arg, columns = stmt.arg, stmt.columns
        new = [(a, approval_doc(a)) for a, insert in self._approvals.values() if insert]
        moved = [(a, approval_doc(a)) for a, insert in self._approvals.values() if not insert]
        if new:
            rows = [approval_row(a, doc) for a, doc in new]
            kinds = (
                "text",
                "text",
                "int4",
                "float8",
                "float8",
                "text",
                "text",
                "int8",
                "text",
                "float8",
                *["text"] * 3,
            )
            stmt.parts.append(
                f"INSERT INTO approvals ({APPROVAL_COLUMNS}) SELECT * FROM unnest(" + columns(rows, kinds) + ")"
            )
        reviewers = [*self._reviewers, *(row for a, _ in new for row in reviewer_rows(a))]
        if reviewers:  # checked against its approval at the statement's end, after an insert in the same statement
            stmt.parts.append(
                "INSERT INTO approval_reviewers (reviewer, created_at, approval_id) SELECT * FROM unnest("
                + columns(reviewers, ("text", "float8", "text"))
                + ") ON CONFLICT DO NOTHING"
            )
        for a, doc in moved:  # by key, one part each: an index lookup in any plan, never a scan of the table
            stmt.parts.append(
                f"UPDATE approvals SET status = {arg(str(a.status))}, version = {arg(a.version)}, "
                f"doc = {arg(doc)} WHERE id = {arg(a.id)}"
            )

    def _claim_parts(self, stmt: _Statement) -> None:
        if not self._claims:
            return
        stmt.parts.append(
            "INSERT INTO claims (key, action_hash, holder, attempt, state, lease_until, result) SELECT * FROM "
            "unnest("
            + stmt.columns(
                [claim_row(cl) for cl in self._claims.values()],
                ("text", "text", "text", "int4", "text", "float8", "text"),
            )
            + ") ON CONFLICT (key) DO UPDATE SET action_hash = excluded.action_hash, holder = excluded.holder, "
            "attempt = excluded.attempt, state = excluded.state, lease_until = excluded.lease_until, "
            "result = excluded.result"
        )

    def _audit_parts(self, stmt: _Statement) -> None:
        entries, heads = self._linked()
        stmt.parts.append(
            f"INSERT INTO audit ({AUDIT_COLUMNS}, prev, link) SELECT {AUDIT_COLUMNS}, prev, link FROM unnest("
            + stmt.columns(entries, ("float8", "text", "text", "text", "int4", *["text"] * 7))
            + f") WITH ORDINALITY AS e ({AUDIT_COLUMNS}, prev, link, n) ORDER BY n"  # the chains' own order
        )
        stmt.parts.append(
            "INSERT INTO audit_heads (chain, length, link) SELECT * FROM unnest("
            + stmt.columns(heads, ("text", "int4", "text"))
            + ") ON CONFLICT (chain) DO UPDATE SET length = excluded.length, link = excluded.link"
        )

    def _job_and_grant_parts(self, stmt: _Statement) -> None:
        if self._jobs:
            stmt.parts.append(
                "INSERT INTO jobs (kind, payload, approval_id, created_at) SELECT * FROM unnest("
                + stmt.columns(self._jobs, ("text", "text", "text", "float8"))
                + ")"
            )
        if self._grants:
            grants = [(g.session_id, g.requester, g.tool, g.granted_by, g.until) for g in self._grants]
            stmt.parts.append(
                "INSERT INTO trust_grants (session_id, requester, tool, granted_by, until) SELECT * FROM unnest("
                + stmt.columns(grants, ("text", "text", "text", "text", "float8"))
                + ") ON CONFLICT (session_id, requester, tool) DO UPDATE SET granted_by = excluded.granted_by, "
                "until = excluded.until"
            )

    def _run_parts(self, stmt: _Statement) -> None:
        arg = stmt.arg
        if self._checkpoint is not None:
            run_id, version, data, at, status = self._checkpoint
            stmt.parts.append(
                "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES "
                f"({arg(run_id)}, {arg(version)}, {arg(data)}, {arg(at)}, {arg(status)}) ON CONFLICT (run_id) DO "
                "UPDATE SET version = excluded.version, data = excluded.data, updated_at = excluded.updated_at, "
                "status = excluded.status"
            )
        if self._owner is not None:
            run_id, holder, until = self._owner
            stmt.parts.append(
                f"INSERT INTO run_owners (run_id, holder, lease_until) VALUES ({arg(run_id)}, {arg(holder)}, "
                f"{arg(until)}) ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, "
                "lease_until = excluded.lease_until"
            )
        if self._release is not None:
            run_id, by = self._release
            held = f" AND holder = {arg(by)}" if by is not None else ""
            stmt.parts.append(f"DELETE FROM run_owners WHERE run_id = {arg(run_id)}{held}")

    async def _read_heads(self, c: Conn) -> None:
        missing = sorted({e.approval_id or "" for e in self._audit} - set(self._heads))
        if not missing:
            return
        if self._guarded:
            raise AssertionError(f"audit chains {missing} were not read with the state this write is guarded by")
        self._heads.update(dict.fromkeys(missing))
        # Each head by its key with `=` (an index lookup in a generic plan too; see state_sql).
        sql = " UNION ALL ".join(
            f"SELECT chain, length, link FROM audit_heads WHERE chain = ${i}" for i in range(1, len(missing) + 1)
        )
        for chain, length, link in await c.fetch(sql, *missing):
            self._heads[chain] = (int(length), str(link))

    def _linked(self) -> tuple[list[tuple[Any, ...]], list[tuple[str, int, str]]]:
        """The entries' rows with their links, each chain worked forward from its head; the chains' new heads."""
        heads = dict(self._heads)
        rows = []
        moved: dict[str, Head] = {}
        for e in self._audit:
            chain = e.approval_id or ""
            length, prev = heads.get(chain) or (0, "")
            link = chain_link(prev, entry_body(e))
            rows.append((*audit_values(e), prev, link))
            heads[chain] = moved[chain] = (length + 1, link)
        return rows, [(chain, length, link) for chain, (length, link) in moved.items()]


class _Statement:
    """One statement being built: its parts (each a data-changing ``WITH`` query) and its numbered arguments."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.args: list[Any] = []

    def arg(self, value: Any) -> str:
        """``value`` as the statement's next argument (``$n``)."""
        self.args.append(value)
        return f"${len(self.args)}"

    def columns(self, rows: Sequence[Sequence[Any]], types: Sequence[str]) -> str:
        """``unnest`` of one array per column, in row order."""
        return ", ".join(f"{self.arg([r[i] for r in rows])}::{t}[]" for i, t in enumerate(types))
