"""A consequence run in the process that holds the tool (an in-process ``ask``, ``guard`` or tool gate), in a thread
of its own with the time bound. A thread cannot be killed: at the bound the approval is asked without the
consequence, and the thread keeps its tool's slot until the callable returns, so a consequence that hangs uses up
its tool's ``workers`` and later calls are ``busy`` at once rather than piling up threads."""

from __future__ import annotations

import asyncio
import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from hitl.engine.consequences.callables import ConsequenceFn, resolve
from hitl.engine.consequences.running import ConsequenceCall, Slots
from hitl.engine.domain.consequences import Consequence

__all__ = ["ThreadConsequences"]


@dataclass
class ThreadConsequences:
    """Runs consequences in threads of this process (:class:`~.running.ConsequenceRunner`)."""

    slots: Slots = field(default_factory=Slots)

    async def compute(self, call: ConsequenceCall) -> Consequence:
        """``call``'s consequence of a deep copy of its arguments (it cannot change what runs), within its limits."""
        tool, limits = call.tool, call.limits
        try:
            fn = resolve(call.source, tool=tool) if isinstance(call.source, str) else call.source
        except Exception as exc:  # imported when the config was loaded; gone since: say so, ask without it
            return call.failed(str(exc))
        if not self.slots.take(tool, limits.workers):
            return call.busy()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[bool, object]] = loop.create_future()
        thread = threading.Thread(
            target=_call, args=(fn, copy.deepcopy(dict(call.args)), loop, done), name=f"consequence:{tool}", daemon=True
        )
        done.add_done_callback(lambda _: self.slots.give_back(tool))  # when it returns, not at the bound
        thread.start()
        try:
            ok, value = await asyncio.wait_for(asyncio.shield(done), limits.timeout)
        except TimeoutError:
            return call.timed_out()
        return call.answered(value) if ok else call.failed(str(value))

    async def aclose(self) -> None:
        """Nothing to stop: a thread still running ends on its own."""


def _call(
    fn: ConsequenceFn, args: dict[str, Any], loop: asyncio.AbstractEventLoop, done: asyncio.Future[tuple[bool, object]]
) -> None:
    try:
        outcome: tuple[bool, object] = (True, fn(args))
    except BaseException as exc:  # the author's code: whatever it raises is a failed consequence
        outcome = (False, f"raised {type(exc).__name__}: {str(exc)[:200]}")

    def settle() -> None:
        if not done.done():
            done.set_result(outcome)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop closed while it ran: nobody waits any more
        pass
