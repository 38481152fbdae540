"""Background work for ``hitl serve``: resume runs after decisions, expire, remind, keep cards posted.

Resume jobs are durable (the store's job queue: a Redis stream with a consumer group, or a SQLite table),
so a decision never loses its resume to a crash or restart, and any replica can pick the job up.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.context import BotContext
from bot.escape import label
from engine.config import load_config
from engine.domain.models import Approval, Status
from engine.errors import EngineError, ErrorCode
from engine.runner.executor import Runner, RunResult
from engine.runner.state import RunState, RunStatus
from engine.service import ApprovalService

__all__ = ["Worker"]

log = logging.getLogger("hitl.bot")
_DECIDED = {Status.APPROVED, Status.REJECTED, Status.EXPIRED, Status.CANCELLED, Status.SUPERSEDED}


class Worker:
    def __init__(self, ctx: BotContext, *, interval: float = 5.0, lease: float = 120.0) -> None:
        self.ctx = ctx
        self.interval = interval
        self.lease = lease
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._services: dict[str | None, ApprovalService] = {}
        self._ticks = 0
        self._recovered: set[tuple[str, str]] = set()

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="hitl-worker")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("worker tick failed; trying again")
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except TimeoutError:
                pass
            self._wake.clear()

    # -- hooks ----------------------------------------------------------------------------------------------
    async def approval_decided(self, a: Approval) -> None:
        """A decision (or expiry) on an approval some run is paused on: queue its resume durably."""
        if a.status in _DECIDED and a.metadata.get("step"):
            await self.ctx.store.jobs.enqueue(
                "resume", {"session_id": a.session_id, "approval_id": a.id}, now=self.ctx.service.clock.now()
            )
            self._wake.set()

    # -- one round of work ----------------------------------------------------------------------------------
    async def tick(self) -> None:
        await self.ctx.service.expire_due(limit=200)
        self._ticks += 1
        if self._ticks % 12 == 1:
            await self.recover_resumes()
        await self.process_jobs()
        await self.sweep_pending()

    async def recover_resumes(self) -> int:
        """Queue a resume for every paused run whose approval was decided but whose job never got queued
        (the process died between the decision and the enqueue). Resuming twice is harmless."""
        queued = 0
        now = self.ctx.service.clock.now()
        for run_id in await self.ctx.store.runs.paused(limit=500):
            found = await self.ctx.store.runs.load(run_id)
            waiting = found[0].get("waiting") if found else None
            if not waiting:
                continue
            try:
                approval = await self.ctx.store.approvals.get(str(waiting))
            except EngineError:
                continue
            # Give the normal path a minute, and recover each (run, approval) once per process.
            fresh = now - approval.updated_at < 60
            if approval.status in _DECIDED and not fresh and (run_id, approval.id) not in self._recovered:
                self._recovered.add((run_id, approval.id))
                await self.ctx.store.jobs.enqueue("resume", {"session_id": run_id, "approval_id": approval.id}, now=now)
                queued += 1
        return queued

    async def process_jobs(self) -> int:
        jobs = await self.ctx.store.jobs.claim(
            self.ctx.replica, kind="resume", limit=20, now=self.ctx.service.clock.now(), lease=self.lease
        )
        for job in jobs:
            try:
                done = await self._resume(job.payload) if job.kind == "resume" else True
            except Exception:
                log.exception("job %s failed; it will be retried", job.id)
                done = False
            if done:
                await self.ctx.store.jobs.ack(job.id)
        return len(jobs)

    async def sweep_pending(self) -> None:
        """Post cards that never made it, and one reminder before expiry."""
        now = self.ctx.service.clock.now()
        before = self.ctx.config.slack.reminder_before
        page = await self.ctx.store.approvals.list_pending(limit=200)
        for a in page.items:
            if await self.ctx.store.messages.get(a.id) is None:
                await self.ctx.notifier.post_card(a)
            elif before and 0 < a.expires_at - now <= before:
                await self.ctx.notifier.remind(a)

    # -- resuming -------------------------------------------------------------------------------------------
    def _service_for(self, config_path: str | None) -> ApprovalService:
        if config_path not in self._services:
            base = self.ctx.service
            cfg = load_config(config_path) if config_path else self.ctx.config
            svc = ApprovalService.from_config(cfg, store=base.store, clock=base.clock, notifier=base.notifier)
            self._services[config_path] = svc
        return self._services[config_path]

    async def _resume(self, payload: dict[str, Any]) -> bool:
        """True when the job is finished with (resumed, or nothing to do); False to retry later."""
        found = await self.ctx.store.runs.load(str(payload["session_id"]))
        if found is None:
            return True
        state = RunState.model_validate({**found[0], "version": found[1]})
        if state.waiting != payload["approval_id"] or state.status is not RunStatus.PAUSED:
            return True  # resumed already (by the CLI or another replica)
        runner = Runner(self._service_for(state.config_path), worker_id=self.ctx.replica)
        try:
            result = await runner.resume(state.session_id, actor="slack")
        except EngineError as exc:
            if exc.code in (ErrorCode.STALE_VERSION, ErrorCode.CLAIM_IN_PROGRESS):
                return False
            await self._tell(payload["approval_id"], f":warning: The run could not continue: {label(exc.message, 500)}")
            return True
        await self._report(str(payload["approval_id"]), result)
        return True

    async def _report(self, approval_id: str, result: RunResult) -> None:
        approval = await self.ctx.store.approvals.get(approval_id)
        await self.ctx.notifier.approval_changed(approval)
        if result.status is RunStatus.FAILED:
            reason = label(result.reason or "unknown error", 500)
            await self._tell(
                approval_id, f":warning: The run failed: {reason}. Retry with `hitl resume {result.session_id}`."
            )
        elif result.status is RunStatus.COMPLETED:
            await self._tell(approval_id, f":checkered_flag: Run `{result.session_id}` completed.")

    async def _tell(self, approval_id: str, text: str) -> None:
        ref = await self.ctx.store.messages.get(approval_id)
        if ref is None:
            return
        try:
            await self.ctx.notifier.client.chat_postMessage(channel=ref.channel, thread_ts=ref.ts, text=text)
        except Exception:
            log.exception("could not post to the card's thread")
