"""PostgreSQL store: for teams whose durable state lives in PostgreSQL (managed, replicated, backed up).

Every call runs one ``SERIALIZABLE`` transaction, run again when PostgreSQL aborts it for a conflicting one, so a
decision, a run's step boundary or an audit append is one atomic step as on the other stores. Changes are announced
with ``LISTEN``/``NOTIFY``. Needs the ``postgres`` extra (asyncpg).
"""

from __future__ import annotations

from hitl.engine.storage.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
