"""``/hitl run WORKFLOW [key=value ...]``: a run started from Slack, acting for the Slack user who asked.

Only members of ``slack.run_role`` may start one, and only a workflow registered under ``api.workflows`` (looked up
as ``POST /runs`` looks it up), its variables checked as every start checks them. Everything that can be refused is
refused before Slack is answered, with nothing started; the request is audited, then answered ("started run …"),
and the run starts after the answer (a run may take longer than Slack's 3 s). The run's person is the user id of
the signed request, so a ``self`` step in it is theirs alone to confirm.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hitl.bot.context import BotContext
from hitl.bot.views.escape import label
from hitl.engine.config.hitl_yaml import HitlConfig, load_config
from hitl.engine.domain.ids import keyed_session_id, new_session_id
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput

__all__ = ["RUN_USAGE", "Start", "run_command"]

log = logging.getLogger(__name__)

RUN_USAGE = "/hitl run WORKFLOW [key=value ...]"
MAX_VARS = 50
"""At most this many ``key=value`` pairs in one command."""
_KEY = re.compile(r"^[A-Za-z_]\w{0,63}$")

Start = Callable[[Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]
"""Starts the accepted run once Slack has its answer; tells the user how it went through the callable it is given."""


async def run_command(
    ctx: BotContext, user: str, rest: list[str], *, request: str | None
) -> tuple[dict[str, Any], Start | None]:
    """What ``/hitl run`` answers at once, and the start to do after the answer (None when refused). ``request``:
    the command's own id (its ``trigger_id``), which names the run, so that a replayed request starts nothing more."""
    try:
        return await _accepted(ctx, user, rest, request)
    except EngineError as exc:
        try:
            await _audit(ctx, user, "refused", str(exc.code), f"/hitl run {' '.join(rest)[:200]}: {exc.message}")
        except Exception:  # the refusal still reaches the person; what went unrecorded is in the log
            log.exception("could not audit a refused /hitl run")
        return {"text": f":no_entry: `{exc.code}`: {label(exc.message, 600)}\nNothing was started."}, None
    except Exception:  # a sentence, never silence: Slack still gets its answer in time
        log.exception("/hitl run failed before anything started")
        return {"text": ":warning: Something went wrong; nothing was started. Try again in a moment."}, None


async def _accepted(ctx: BotContext, user: str, rest: list[str], request: str | None) -> tuple[dict[str, Any], Start]:
    config, base = await _served(ctx)
    role = config.slack.run_role
    if role is None:
        raise EngineError(
            "starting runs from Slack is off: hitl.yaml names no slack.run_role (the role whose members may)",
            code=ErrorCode.NOT_ELIGIBLE,
        )
    if role not in (await ctx.reviewers.reviewer(user)).roles:
        raise EngineError(
            f"only the {role} role may start runs from Slack (hitl.yaml slack.run_role); ask one of its members",
            code=ErrorCode.NOT_ELIGIBLE,
        )
    if not rest:
        raise InvalidInput(f"name a workflow: {RUN_USAGE}")
    workflow = ctx.lifecycle.contexts.workflows.load(config.api.workflow_file(rest[0], base))
    values = _pairs(rest[1:])
    from hitl.engine.runner.checks import check_templates, resolve_vars  # with a run: `hitl serve` starts without them

    resolve_vars(workflow, values)  # unknown or missing variables: refused here, before anything starts
    check_templates(workflow)
    session_id = keyed_session_id(f"slack-run:{request}") if request else new_session_id()
    if await ctx.store.runs.load(session_id) is not None:  # the same signed request again (a replay)
        raise InvalidInput(f"this request, delivered again, already started run {session_id}")
    detail = f"{rest[0]} as {session_id} for {user} via slack"
    await _audit(ctx, user, "run_requested", "ok", detail)  # recorded before Slack is answered

    async def start(tell: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        try:
            result = await ctx.lifecycle.start(workflow, values, session_id=session_id, on_behalf_of=user)
        except EngineError as exc:
            await tell({"text": f":warning: Run `{session_id}` did not start: `{exc.code}`: {label(exc.message, 600)}"})
            return
        except Exception:  # told, not left waiting: the operator finds the rest in the log
            log.exception("run %s from /hitl run failed", session_id)
            await tell({"text": f":warning: Run `{session_id}` failed unexpectedly; the server log says why."})
            return
        waiting = f", waiting on `{result.approval.id}`" if result.approval is not None else ""
        await tell({"text": f"Run `{session_id}` is {result.status}{waiting}."})

    name = label(workflow.spec.name, 64)
    return {"text": f":arrow_forward: Started run `{session_id}` of `{name}`, acting for <@{user}>."}, start


async def _served(ctx: BotContext) -> tuple[HitlConfig, Path]:
    """The served hitl.yaml as it is now, and its directory: read at each command, as ``POST /runs`` reads it, so a
    workflow registered or a ``slack.run_role`` removed counts from the next command on (one that no longer loads
    refuses every command: ``policy_invalid``)."""
    served = ctx.lifecycle.contexts.default.config_path
    if served is None:
        return ctx.config, Path.cwd()
    return await asyncio.to_thread(load_config, served), Path(served).parent


def _pairs(words: list[str]) -> dict[str, Any]:
    """``key=value`` words as the run's variables (values as text, as ``hitl run --var`` takes them)."""
    if len(words) > MAX_VARS:
        raise InvalidInput(f"at most {MAX_VARS} key=value pairs; {RUN_USAGE}", code=ErrorCode.VARIABLES_INVALID)
    out: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not _KEY.match(key):
            raise InvalidInput(f"{word[:60]!r} is not key=value; {RUN_USAGE}", code=ErrorCode.VARIABLES_INVALID)
        if key in out:
            raise InvalidInput(f"{key} is given twice", code=ErrorCode.VARIABLES_INVALID)
        out[key] = value
    return out


async def _audit(ctx: BotContext, user: str, event: str, outcome: str, detail: str) -> None:
    entry = AuditEntry(at=ctx.clock.now(), actor=user, event=event, outcome=outcome, detail=detail[:500])
    await ctx.store.audit.append(entry)
