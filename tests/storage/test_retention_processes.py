"""Purges racing in real processes (`hitl serve` replicas, or a cron `hitl purge` beside them), on both stores: each
record is removed once, the counts add up, and the trail verifies."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.retention import PURGE_EVENT
from hitl.engine.storage import open_store
from hitl.engine.testing.conformance.helpers import cmd
from hitl.testing import make_approval
from tests.storage.conftest import StoreUrl


async def test_three_purges_at_once_remove_each_record_once(store_url: StoreUrl) -> None:
    url = store_url.url
    long_ago = time.time() - 40 * 86400  # the CLI purges at the real time
    store = open_store(url)
    try:
        for i in range(300):
            a, _ = await store.approvals.create(make_approval(now=long_ago, session_id=f"s{i}"))
            await store.approvals.decide(cmd(a, "U_SUPPORT1", DecisionKind.REJECT, reason="no"), now=long_ago)
    finally:
        await store.close()
    env = {**os.environ, "HITL_STORE": url}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hitl", "purge", "--json", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(3)
    ]
    try:
        outs = [await asyncio.wait_for(p.communicate(), 120) for p in procs]
    finally:  # never leaked: a purge that hangs is killed
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    assert [p.returncode for p in procs] == [0, 0, 0], [e.decode() for _, e in outs]
    removed = [json.loads(o)["removed"]["approvals"] for o, _ in outs]
    assert sum(removed) == 300
    store = open_store(url)
    try:
        assert (await store.approvals.list_recent(limit=10)).items == []
        purges = [e for e in await store.audit.entries(limit=10_000) if e.event == PURGE_EVENT]
        assert sum(json.loads(e.detail)["approvals"] for e in purges) == 300  # the audited counts add up too
        checked, broken = await store.audit.verify()
        assert broken is None and checked == 600 + len(purges)  # every chain kept, and the purge entries
    finally:
        await store.close()
