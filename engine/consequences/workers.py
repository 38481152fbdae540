"""A consequence run in a worker process (``hitl serve``, where the API and Slack propose): started with ``python -I``
and an environment scrubbed to an allow-list (``PATH``, ``HOME``, ``LANG``, ``LC_ALL``, ``TZ`` and what the tool's
``consequence_limits.env`` names; never a ``HITL_`` or ``SLACK_`` variable), so it holds no receipt key and no
token; killed at its time bound and replaced when next needed. Each tool has a pool of at most ``workers``
processes, each running one consequence at a time; one more call is ``busy`` at once."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hitl.engine.consequences.running import ConsequenceCall, Slots
from hitl.engine.consequences.threads import ThreadConsequences
from hitl.engine.domain.consequences import Consequence, ConsequenceLimits

__all__ = ["ALLOWED_ENV", "WorkerConsequences", "scrubbed"]

ALLOWED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")
"""What every worker's environment may hold; a tool adds names with ``consequence_limits.env``."""
_MAIN = str(Path(__file__).with_name("worker_main.py"))


def scrubbed(environ: Mapping[str, str], extra: tuple[str, ...]) -> dict[str, str]:
    """A worker's environment: the allow-list and ``extra`` as ``environ`` has them, nothing of hitl's or Slack's."""
    names = [n for n in (*ALLOWED_ENV, *extra) if not n.startswith(("HITL_", "SLACK_"))]
    return {n: environ[n] for n in names if n in environ}


@dataclass(eq=False)  # each process is itself: kept in sets by identity
class _Worker:
    process: asyncio.subprocess.Process

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None  # started with both piped
        stdin.write((json.dumps(request, ensure_ascii=False) + "\n").encode())
        await stdin.drain()
        line = await stdout.readline()  # ValueError past the reader's limit: more than the bound allows
        if not line:
            raise EOFError("the worker process ended")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


@dataclass
class WorkerConsequences:
    """Runs ``module:function`` consequences in worker processes (:class:`~.running.ConsequenceRunner`); a callable
    given in Python (there is none in ``hitl serve``) runs in a thread of this process."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    threads: ThreadConsequences = field(default_factory=ThreadConsequences)
    slots: Slots = field(default_factory=Slots)
    _idle: dict[str, list[_Worker]] = field(default_factory=dict)
    _all: set[_Worker] = field(default_factory=set)
    _reaping: set[asyncio.Task[int]] = field(default_factory=set)
    _home: str | None = None
    """The empty folder workers start in (made when the first one starts, removed at close)."""

    async def compute(self, call: ConsequenceCall) -> Consequence:
        """``call``'s consequence computed in a worker process of its tool's, within its limits."""
        tool, limits = call.tool, call.limits
        if not isinstance(call.source, str):
            return await self.threads.compute(call)
        if not self.slots.take(tool, limits.workers):
            return call.busy()
        worker: _Worker | None = None
        try:
            async with asyncio.timeout(limits.timeout):
                worker = await self._worker(tool, limits)
                path = [p or os.getcwd() for p in sys.path]  # "" is this process's folder, not the worker's
                answer = await worker.ask({"path": path, "ref": call.source, "args": dict(call.args)})
        except TimeoutError:
            self._discard(worker)
            return call.timed_out()
        except (ValueError, RecursionError, EOFError, OSError) as exc:
            self._discard(worker)
            why = "more than it may" if isinstance(exc, ValueError | RecursionError) else str(exc)
            return call.failed(f"its worker answered {why}")
        finally:
            self.slots.give_back(tool)
        self._idle.setdefault(tool, []).append(worker)
        return call.failed(str(answer["failed"])) if "failed" in answer else call.answered(answer.get("value"))

    async def _worker(self, tool: str, limits: ConsequenceLimits) -> _Worker:
        idle = self._idle.get(tool, [])
        while idle:
            worker = idle.pop()
            if worker.process.returncode is None:
                return worker
            self._all.discard(worker)
        if self._home is None:
            self._home = tempfile.mkdtemp(prefix="hitl-consequence-")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            _MAIN,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=scrubbed(self.environ, limits.env),
            cwd=self._home,
            limit=limits.max_bytes * 6 + 1024,  # JSON may escape each byte; past this the answer is too big
        )
        worker = _Worker(process)
        self._all.add(worker)
        return worker

    def _discard(self, worker: _Worker | None) -> None:
        """Kill a worker that ran past its bound or broke its protocol; the next call starts a new one."""
        if worker is None:
            return
        worker.kill()
        self._all.discard(worker)
        task = asyncio.get_running_loop().create_task(worker.process.wait())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def aclose(self) -> None:
        """Kill every worker process and wait for them."""
        for worker in list(self._all):
            worker.kill()
            await worker.process.wait()
        self._all.clear()
        self._idle.clear()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
