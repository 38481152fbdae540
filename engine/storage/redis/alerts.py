"""Each alert's state in Redis: one hash (name -> ``{"version": n, "data": ...}``), each save one script."""

from __future__ import annotations

import json
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.runs import StoredRun
from hitl.engine.storage.codec import dumps
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisAlerts"]


class RedisAlerts(RedisPart):
    """:class:`hitl.engine.ports.AlertStates` on Redis."""

    async def load(self, name: str) -> StoredRun | None:
        raw = await self.r.hget(self.conn.alerts_key, name)
        if raw is None:
            return None
        found = json.loads(text(raw))
        return StoredRun(found["data"], int(found["version"]))

    async def save(self, name: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        out = await self.conn.call(
            self.conn.alert_save_script, [self.conn.alerts_key], [name, expected_version, dumps(data)]
        )
        stored = int(out[1])
        if text(out[0]) != "ok":
            claim_rules.check_checkpoint_version(f"alert {name}", stored, expected_version)
        return stored
