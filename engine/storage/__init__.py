"""Store backends: SQLite (embedded default) and Redis (shared production store)."""

from __future__ import annotations

from hitl.engine.storage.factory import open_store

__all__ = ["open_store"]
