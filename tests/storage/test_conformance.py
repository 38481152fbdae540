"""Both stores pass the one conformance suite."""

from __future__ import annotations

import pytest

from engine.storage.redis import RedisStore
from engine.storage.sqlite import SqliteStore
from engine.testing import StoreConformance


class TestSqliteConformance(StoreConformance):
    @pytest.fixture
    def store(self, sqlite_store: SqliteStore) -> SqliteStore:
        return sqlite_store


class TestRedisConformance(StoreConformance):
    @pytest.fixture
    def store(self, redis_store: RedisStore) -> RedisStore:
        return redis_store
