"""Log lines of the long-running commands: JSON for a collector, text at a terminal, each naming what it is about."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from hitl.engine.process.log_context import about
from hitl.logs import configure_logging
from hitl.sandbox.server import start_emulator
from tests.bot.conftest import CONFIG, serve_env, serve_process, workspace
from tests.waiting import eventually


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_name_the_approval_the_run_and_the_replica() -> None:
    out = io.StringIO()
    configure_logging(logging.INFO, replica="bot:host:r1", fmt="auto", stream=out)  # not a terminal: JSON
    log = logging.getLogger("hitl.engine.runtime.lifecycle")
    with about(session_id="ses_1"), about(approval_id="apr_1"):
        log.warning("resume job %s failed", "j-1")
    log.info("outside")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["message"] == "resume job j-1 failed" and first["level"] == "WARNING"
    assert first["logger"] == "hitl.engine.runtime.lifecycle" and "time" in first
    assert (first["approval_id"], first["session_id"], first["replica"]) == ("apr_1", "ses_1", "bot:host:r1")
    assert "approval_id" not in second and second["replica"] == "bot:host:r1"  # the context ended with the block


def test_a_terminal_gets_text_with_the_same_facts() -> None:
    out = _Terminal()
    configure_logging(logging.INFO, stream=out)
    with about(approval_id="apr_2"):
        logging.getLogger("hitl.bot.listeners").warning("refused a click")
    line = out.getvalue().strip()
    assert "WARNING hitl.bot.listeners: refused a click [approval_id=apr_2]" in line
    assert not line.startswith("{")


def test_the_format_can_be_forced_and_a_wrong_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _Terminal()
    monkeypatch.setenv("HITL_LOG_FORMAT", "json")
    configure_logging(stream=out)
    logging.getLogger("x").info("hello")
    assert json.loads(out.getvalue())["message"] == "hello"
    monkeypatch.setenv("HITL_LOG_FORMAT", "yaml")
    with pytest.raises(ValueError, match="auto, json or text"):
        configure_logging(stream=out)


async def test_hitl_serve_writes_json_lines_with_its_replica(tmp_path: Path) -> None:
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=CONFIG)
    try:
        async with serve_process(env, tmp_path):
            await eventually(  # serve_process waited for /healthz; the start line was written before it listened
                lambda: "serving Slack requests" in (tmp_path / "serve.log").read_text(), what="the start line"
            )
    finally:
        await emulator.close()
    lines = [line for line in (tmp_path / "serve.log").read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line, JSON: its output is a file, not a terminal
    started = [r for r in records if "serving Slack requests" in r["message"]]
    assert started and started[0]["replica"].startswith("bot:")
