"""The CLI as an API client: with ``HITL_API_URL`` and ``HITL_TOKEN`` set, ``hitl pending/show/resume/audit`` go
through ``hitl serve``'s HTTP API, so a reviewer's decision is authenticated by their token (and audited as
``api:<token name>``) instead of by whatever ``--as`` says.

Exported variables are easy to forget: an agent's token left in the shell would make a reviewer's ``hitl pending``
ask as the agent, and answer "no pending approvals". So :func:`connect` says on stderr, before anything else, which
address and identity the command uses, and refuses an ``--as`` that names someone the token does not act as.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import typer

from hitl.api.group_decision_models import GroupDecisionView
from hitl.api.models import ApprovalList, ApprovalView, AuditList, AuditView, TokenView
from hitl.api.run_models import RunView
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.ranking import PendingOrder
from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["ApiClient", "RemoteRefused", "connect", "remote_from_env"]

_CODES = {c.value for c in ErrorCode}
_BY_STATUS = {
    401: ErrorCode.NOT_ELIGIBLE,
    403: ErrorCode.NOT_ELIGIBLE,
    404: ErrorCode.NOT_FOUND,
    422: ErrorCode.INVALID_INPUT,
}


class RemoteRefused(EngineError):
    """The API said no; ``message`` is its message, with its code."""

    default_code = ErrorCode.INVALID_INPUT


@dataclass(frozen=True)
class ApiClient:
    """The CLI's client of the HTTP API (``HITL_API_URL`` and ``HITL_TOKEN``)."""

    url: str
    token: str

    async def call(self, method: str, path: str, *, json: Any = None, query: Mapping[str, str] | None = None) -> Any:
        # The standard library's client, in a thread: one request per command, and no aiohttp in a CLI install.
        url = f"{self.url}/api/v1{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = jsonlib.dumps(json).encode() if json is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            status, raw = await asyncio.to_thread(_send, request)
            body = jsonlib.loads(raw) if raw else None
        except (OSError, ValueError) as exc:
            raise EngineError(
                f"hitl serve at {self.url} did not answer ({type(exc).__name__}); is it running, and is HITL_API_URL "
                "right?",
                code=ErrorCode.STORE_ERROR,
            ) from None
        if status >= 400:
            err = body.get("error", {}) if isinstance(body, dict) else {}
            code = str(err.get("code", "error"))
            mapped = ErrorCode(code) if code in _CODES else _BY_STATUS.get(status, ErrorCode.STORE_ERROR)
            raise RemoteRefused(f"{err.get('message', f'HTTP {status}')} (API: {status} {code})", code=mapped)
        return body

    async def whoami(self) -> TokenView:
        """Who the token acts as (``GET /whoami``)."""
        return TokenView.model_validate(await self.call("GET", "/whoami"))

    async def approval(self, target: str) -> ApprovalView:
        """An approval id, or a session id whose run waits on an approval."""
        if not target.startswith("apr_"):
            run = RunView.model_validate(await self.call("GET", f"/runs/{target}"))
            if run.approval is None:
                raise RemoteRefused(f"run {target} is not waiting on an approval (it is {run.status})")
            target = run.approval.id
        return ApprovalView.model_validate(await self.call("GET", f"/approvals/{target}"))

    async def audit(self, target: str | None, *, limit: int) -> list[AuditView]:
        if target:
            return list((await self.approval(target)).audit or [])[-limit:]
        body = await self.call("GET", "/audit", query={"limit": str(min(limit, 5000))})
        return AuditList.model_validate(body).entries

    async def pending(self, *, limit: int, order: PendingOrder = "rank") -> ApprovalList:
        """The pending approvals the token may decide, in ``order``, and how many wait on it."""
        query = {"decidable": "true", "limit": str(min(limit, 200)), "order": order}
        return ApprovalList.model_validate(await self.call("GET", "/approvals", query=query))

    async def decide(
        self,
        target: str,
        kind: DecisionKind,
        *,
        reason: str | None,
        args: dict[str, Any] | None,
        replace_args: bool = False,
        confirm: dict[str, str] | None = None,
    ) -> ApprovalView:
        """Decide ``target`` bound to the version and hash the server shows now; the approval after it."""
        current = await self.approval(target)
        body: dict[str, Any] = {
            "decision": str(kind),
            "expected_version": current.version,
            "action_hash": current.action_hash,
        }
        if reason is not None:
            body["reason"] = reason
        if args is not None:
            body["args"] = args
        if replace_args:
            body["replace_args"] = True
        if confirm:
            body["confirm"] = confirm
        return ApprovalView.model_validate(await self.call("POST", f"/approvals/{current.id}/decisions", json=body))

    async def decide_group(
        self, targets: Sequence[str], kind: DecisionKind, *, reason: str | None
    ) -> GroupDecisionView:
        """Decide ``targets`` together (``POST /decisions``), each bound to the version and hash the server shows
        now; every member's outcome."""
        shown = [await self.approval(t) for t in targets]
        members = [{"id": a.id, "expected_version": a.version, "action_hash": a.action_hash} for a in shown]
        body: dict[str, Any] = {"approvals": members, "decision": str(kind)}
        if reason is not None:
            body["reason"] = reason
        return GroupDecisionView.model_validate(await self.call("POST", "/decisions", json=body))

    async def run_after(self, session_id: str, approval_id: str, *, patience: float = 20.0) -> RunView | None:
        """The run once the server moved it past ``approval_id`` (it resumes runs in its background loop), or as
        it stands after ``patience`` seconds; None when there is no such run."""
        deadline = asyncio.get_running_loop().time() + patience
        while True:
            try:
                run = RunView.model_validate(await self.call("GET", f"/runs/{session_id}"))
            except RemoteRefused as exc:
                if exc.code is ErrorCode.NOT_FOUND:
                    return None
                raise
            # Running: the server is driving it now, past the approval; wait for where it stops.
            moved = run.status != "running" and (
                run.status != "paused" or run.approval is None or run.approval.id != approval_id
            )
            if moved or asyncio.get_running_loop().time() >= deadline:
                return run
            await asyncio.sleep(0.2)

    async def resume(self, session_id: str, *, overrides: dict[str, Any], force: bool) -> RunView:
        body = {"vars": overrides, "force": force}
        return RunView.model_validate(await self.call("POST", f"/runs/{session_id}/resume", json=body))


def _send(request: urllib.request.Request) -> tuple[int, bytes]:
    """The status and body of ``request``; an HTTP error status is an answer, not an exception."""
    try:
        with urllib.request.urlopen(request, timeout=90) as resp:  # http(s) only: remote_from_env checks the URL
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), exc.read()


def remote_from_env(environ: Mapping[str, str] = os.environ) -> ApiClient | None:
    """The API client ``HITL_API_URL`` + ``HITL_TOKEN`` describe; None when neither is set."""
    url, token = environ.get("HITL_API_URL", "").rstrip("/"), environ.get("HITL_TOKEN", "")
    if not url and not token:
        return None
    if not (url and token):
        missing = "HITL_TOKEN" if url else "HITL_API_URL"
        raise EngineError(f"HITL_API_URL and HITL_TOKEN go together: set {missing} too", code=ErrorCode.INVALID_INPUT)
    if not url.startswith(("http://", "https://")):
        raise EngineError(
            f"HITL_API_URL must be an http:// or https:// URL of hitl serve, not {url[:80]!r}",
            code=ErrorCode.INVALID_INPUT,
        )
    return ApiClient(url, token)


async def connect(claimed: str | None, environ: Mapping[str, str] = os.environ) -> ApiClient | None:
    """The API client the environment describes, once it has said on stderr where it asks and as whom; None when
    ``HITL_API_URL`` and ``HITL_TOKEN`` are not set (the command acts on the store).

    Args:
        claimed: who the command was told is acting (``--as`` or ``HITL_REVIEWER``); naming anyone but the token's
            reviewer is a usage error (exit 2) that names both, since the token, not the flag, decides who acts.
    """
    client = remote_from_env(environ)
    if client is None:
        return None
    me = await client.whoami()
    if claimed and claimed != me.reviewer:
        who, acts = _plain(claimed), _plain(me.reviewer)
        raise typer.BadParameter(
            f"HITL_TOKEN acts as {acts} (token {_plain(me.token)}) at {client.url}, not as {who}: unset "
            f"HITL_API_URL and HITL_TOKEN to act on the store as {who}, set HITL_TOKEN to a token of {who}'s "
            f"(hitl token new --as {who}), or drop --as (and HITL_REVIEWER) to act as {acts}",
            param_hint="--as",
        )
    # The token's last four characters tell two tokens of one reviewer apart, and give away nothing of it.
    shown = ("hitl_" if client.token.startswith("hitl_") else "") + "…" + client.token[-4:]
    sys.stderr.write(
        f"hitl: asking {client.url} as {_plain(me.reviewer)} (token {_plain(me.token)}: {_plain(shown)})\n"
    )
    sys.stderr.flush()
    return client


def _plain(text: str) -> str:
    """A name from the server or the command line, printed on one line whatever it holds."""
    return text if text.isprintable() else jsonlib.dumps(text)
