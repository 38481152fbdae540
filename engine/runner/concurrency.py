"""Steps that may run at the same time: each starts once the steps it depends on finished, at most ``limit`` at
once. A step that pauses stops only what depends on it; the others go on until they finish or pause too.

The steps share one run, so their writes go through its one :class:`~hitl.engine.execution.run_lease.RunLease`
(one commit at
a time). A pause's approval is stored as soon as its step pauses (``park``), not when the whole run pauses, so a
reviewer can decide it while the other branches still work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping

from hitl.engine.domain.runs import RunStatus
from hitl.engine.runner.outcomes import Redo, Stop

__all__ = ["Park", "run_together"]

Park = Callable[[str, Stop], Awaitable[bool]]
"""Store the approval step ``id`` pauses on; False when it was answered before (then the step runs again)."""


async def run_together(
    order: list[str],
    deps: Mapping[str, Collection[str]],
    done: set[str],
    run_one: Callable[[str], Awaitable[Stop | Redo | None]],
    park: Park,
    *,
    limit: int,
    redo: Callable[[str, Redo], None],
) -> Stop | None:
    """Run every step of ``order`` not in ``done`` (which grows as they finish).

    Returns None when all finished; the first ending (rejected, failed...) once the steps under way finished (no
    new one starts after it); else the first pause, when some are paused and nothing else can run.
    """
    running: dict[asyncio.Task[Stop | Redo | None], str] = {}
    parked: dict[str, Stop] = {}
    ended: Stop | None = None
    error: BaseException | None = None
    try:
        while True:
            if ended is None and error is None:
                busy = set(running.values())
                for sid in order:
                    if len(running) >= limit:
                        break
                    if sid in done or sid in parked or sid in busy or not set(deps.get(sid, ())) <= done:
                        continue
                    running[asyncio.ensure_future(run_one(sid))] = sid
                    busy.add(sid)
            if not running:
                break
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                sid = running.pop(task)
                try:
                    outcome = task.result()
                except Exception as exc:  # the others finish first: an effect is never cut off mid-way
                    error = error or exc
                    continue
                if outcome is None:
                    done.add(sid)
                elif isinstance(outcome, Redo):
                    redo(sid, outcome)
                elif outcome.status is RunStatus.PAUSED:
                    if await park(sid, outcome):
                        parked[sid] = outcome
                else:
                    ended = ended or outcome
    finally:
        for task in running:  # only when we are cancelled ourselves
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    if error is not None:
        raise error
    if ended is not None:
        return ended
    return next(iter(parked.values()), None)
