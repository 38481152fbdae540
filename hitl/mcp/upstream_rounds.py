"""An upstream's own elicitations for a 2026-07-28 client, relayed across the client's rounds.

A 2026-07-28 client cannot be asked in the middle of its call: its ``tools/call`` ends with ``input_required`` and
its answer comes in a retry. An upstream (speaking an earlier protocol to hitl) asks in the middle of *its* call,
and that question is a live request on the gateway's one session with it: it cannot be sealed into a
``requestState`` and asked again (re-asking would run the upstream tool a second time). So the upstream call runs
in a task of the gateway process that started it; its question ends the client's round as ``input_required``
(marked as the upstream's, :func:`.upstreams.marked`) with a state naming this conversation, and the client's
answer on the retry is handed to the waiting upstream, which goes on until it finishes or asks again.

The conversation is bound to the call's approval and principal (the sealed state is too). A retry that reaches
another replica or a restarted gateway finds no conversation there and gets the call's recorded outcome instead; a
client that never answers leaves the upstream hearing "decline" after ``patience`` seconds. The answer is the
upstream's business only: hitl hands it over and never reads it as a decision (the call was decided before it ran).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from .upstreams import OnElicit

__all__ = ["UPSTREAM_REQUEST", "Asked", "Relays"]

log = logging.getLogger(__name__)
UPSTREAM_REQUEST = "upstream_question"
"""The key of an upstream's own elicitation in an ``input_required`` answer (and of the client's answer to it)."""
_DECLINED = types.ElicitResult(action="decline")


@dataclass(frozen=True)
class Asked:
    """The upstream asked: its (marked) elicitation, and the conversation the client's answer goes back to."""

    conversation: str
    params: types.ElicitRequestParams


@dataclass
class _Conversation:
    principal: str
    approval_id: str
    questions: asyncio.Queue[tuple[types.ElicitRequestParams, asyncio.Future[types.ElicitResult]]]
    run: asyncio.Task[types.CallToolResult] | None = None
    waiting: asyncio.Future[types.ElicitResult] | None = None
    busy: asyncio.Lock = field(default_factory=asyncio.Lock)


def _response(answer: Any) -> types.ElicitResult:
    """The client's answer as an elicitation result; anything else (missing, malformed) is a "decline"."""
    if isinstance(answer, types.ElicitResult):
        return answer
    try:
        return types.ElicitResult.model_validate(answer)
    except ValueError:
        return _DECLINED


class Relays:
    """The upstream calls of this process whose questions wait for a 2026-07-28 client's retry.

    Args:
        patience: seconds an upstream's question waits for the client's answer before the upstream hears "decline".
    """

    def __init__(self, *, patience: float) -> None:
        self.patience = patience
        self._open: dict[str, _Conversation] = {}

    async def start(
        self, run: Callable[[OnElicit], Awaitable[types.CallToolResult]], *, principal: str, approval_id: str
    ) -> types.CallToolResult | Asked:
        """Run ``run`` (the upstream call, given where its elicitations go) until it finishes (its result) or its
        upstream asks (:class:`Asked`, to end the client's round with)."""
        ref = secrets.token_urlsafe(18)
        conversation = _Conversation(principal, approval_id, asyncio.Queue())

        async def ask(params: types.ElicitRequestParams) -> types.ElicitResult:
            answer: asyncio.Future[types.ElicitResult] = asyncio.get_running_loop().create_future()
            await conversation.questions.put((params, answer))
            try:
                return await asyncio.wait_for(answer, self.patience)
            except TimeoutError:  # the client never came back: the upstream hears "decline", as with no client
                self._open.pop(ref, None)
                return _DECLINED

        async def running() -> types.CallToolResult:
            return await run(ask)

        conversation.run = asyncio.create_task(running(), name=f"mcp-relay-{ref[:6]}")
        self._open[ref] = conversation
        async with conversation.busy:
            return await self._next(ref, conversation)

    async def answer(
        self, ref: str, *, principal: str, approval_id: str, answer: Any
    ) -> types.CallToolResult | Asked | None:
        """Hand the client's ``answer`` to the upstream waiting in conversation ``ref``, and go on as
        :meth:`start` does. None: no such conversation here for this principal and approval (another replica's, a
        restarted process's, one past its patience, or one another retry is answering right now)."""
        conversation = self._open.get(ref)
        if (
            conversation is None
            or conversation.principal != principal
            or conversation.approval_id != approval_id
            or conversation.busy.locked()
        ):
            return None
        async with conversation.busy:
            waiting, conversation.waiting = conversation.waiting, None
            if waiting is None or waiting.done():
                return None
            waiting.set_result(_response(answer))
            return await self._next(ref, conversation)

    async def _next(self, ref: str, conversation: _Conversation) -> types.CallToolResult | Asked:
        """Wait for the upstream call to finish or to ask its next question."""
        assert conversation.run is not None
        question = asyncio.ensure_future(conversation.questions.get())
        try:
            await asyncio.wait({conversation.run, question}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not question.done():
                question.cancel()
        if question.done() and not question.cancelled():
            params, conversation.waiting = question.result()
            return Asked(ref, params)
        self._open.pop(ref, None)
        return conversation.run.result()
