"""The store backends every store-facing test runs on, and a fresh store of each by URL.

A test that takes ``backend`` from :data:`BACKENDS` gets its own store: a new SQLite file, a Redis key prefix of
its own, or a PostgreSQL schema of its own on the session's server (so tests never see each other's rows).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

__all__ = ["BACKENDS", "SHARED", "fresh_store_url"]

BACKENDS = ("sqlite", "redis", "postgres")
SHARED = ("redis", "postgres")
"""The stores several replicas share over the network."""


def fresh_store_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path, *, tag: str = "t") -> str:
    """A new, empty store on ``backend``, as ``HITL_STORE`` names it."""
    unique = f"{tag}{uuid.uuid4().hex[:10]}"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / unique}.db"
    if backend == "redis":
        return f"{request.getfixturevalue('redis_url')}?prefix={unique}"
    if backend == "postgres":
        return f"{request.getfixturevalue('postgres_url')}?schema={unique}"
    raise ValueError(f"unknown backend {backend!r}")
