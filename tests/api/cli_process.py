"""The `hitl` CLI run as a real process (a new Python importing hitl from this checkout), with a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.bot.conftest import ROOT

__all__ = ["hitl", "store_env"]


def store_env(folder: Path, **env: str) -> dict[str, str]:
    """The environment of a CLI run on the store and shop kept in ``folder``: no hitl.yaml and no reviewer named
    by the environment the suite runs in (so the run cannot pick up a developer's), then ``env``."""
    return {
        "HITL_STORE": f"sqlite:///{folder}/hitl.db",
        "SHOP_DB": str(folder / "shop.db"),
        "HITL_CONFIG": "",
        "HITL_REVIEWER": "",
        **env,
    }


async def hitl(*args: str, env: dict[str, str]) -> tuple[int, Any, str]:
    """Run `hitl ARGS` with ``env`` added; its exit code, its output (parsed when it is JSON) and its stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hitl",
        *args,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:  # never leaked: a command that hangs is killed
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = out.decode()
    body = json.loads(text) if text.strip().startswith("{") else text
    assert proc.returncode is not None
    return proc.returncode, body, err.decode()
