"""What a store holds, to show that a refusal changed nothing: SQLite's ``iterdump()``, Redis ``DUMP`` of every key,
every row of every PostgreSQL table of the store's schema.
Refusals are audited, so the audit trail and its chain heads are set apart (``without_audit``)."""

from __future__ import annotations

import sqlite3
from typing import Any

from hitl.engine.ports import Store
from hitl.engine.storage import open_store
from hitl.engine.storage.postgres import PostgresStore
from hitl.engine.storage.redis import RedisStore
from hitl.engine.storage.sqlite import SqliteStore

__all__ = ["store_contents", "store_dump", "without_audit"]


async def store_dump(url: str) -> dict[str, Any]:
    """What the store at ``url`` holds (see :func:`store_contents`)."""
    store = open_store(url)
    try:
        return await store_contents(store)
    finally:
        await store.close()


async def store_contents(store: Store) -> dict[str, Any]:
    """Every row (SQLite: by table, as ``iterdump()`` writes it; PostgreSQL: by table, sorted) or every key's
    serialized value (Redis)."""
    if isinstance(store, SqliteStore):
        if not store.path.exists():
            return {}
        with sqlite3.connect(store.path) as db:
            out: dict[str, Any] = {}
            for line in db.iterdump():
                table = line.split('"')[1] if line.startswith("INSERT INTO") else "(schema)"
                out.setdefault(table, []).append(line)
            return out
    if isinstance(store, PostgresStore):
        return await _postgres_rows(store)
    assert isinstance(store, RedisStore)
    r = store.conn.r
    return {k: await r.dump(k) async for k in r.scan_iter(match=f"{store.prefix}:*")}


async def _postgres_rows(store: PostgresStore) -> dict[str, Any]:
    async def rows(c: Any) -> dict[str, Any]:
        tables = await c.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        out: dict[str, Any] = {}
        for (table,) in tables:
            found = await c.fetch(f'SELECT * FROM "{table}"')
            out[table] = sorted((tuple(r) for r in found), key=repr)
        return out

    return await store.db.run(rows, write=False, snapshot=True)


def without_audit(dump: dict[str, Any]) -> dict[str, Any]:
    """The dump less the audit trail (refusals are audited), its heads and counter, and background markers."""
    audit = (
        "audit",
        "audit_heads",
        "sqlite_sequence",
        ":audit",
        ":audit:head",
        ":heads-kept",
        ":retention-indexed",
    )
    return {k: v for k, v in dump.items() if not (k in audit or k.endswith(audit[3:]))}
