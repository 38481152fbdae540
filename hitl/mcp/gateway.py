"""``hitl mcp``: an MCP server in front of the upstream MCP servers in ``hitl.yaml``, every ``tools/call`` gated.

Tools are listed with their upstream input schemas and descriptions; resources and prompts pass through unchanged.
A call goes through the policy by its tool name and arguments (``ToolGate``): allowed calls run at
once; a call that needs a person creates an approval (``hitl serve`` on the same store posts the card) and waits,
sending progress notifications, for at most ``mcp.wait``; after that the answer says it is pending review, and the
identical call later picks up the decision instead of asking again. An approved call runs upstream exactly once
under its approval's execution claim, with exactly the approved arguments (a reviewer's edit, validated against the
upstream ``inputSchema``, included); a rejection answers with the reviewer's reason as a tool error.

The upstream's tool description is untrusted: it reaches the card only as evidence (escaped, apart from the
controls), never as a label.

Who asks: over stdio, the gateway's configured requester (``hitl.yaml``'s ``requester``: the process that started it);
over streamable HTTP, each client's bearer token (``api.tokens`` with the ``propose`` scope), so trust, approvals and
their waits belong to that client's identity and no other's. A tool at tier ``self`` is confirmed by the person the
client's token acts for (its ``acts_for``); over stdio no one is authenticated, so such a call is asked as
``approve`` of the tool's role.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from hitl.api.tokens import Caller, TokenBook
from hitl.engine.agents.gate import Ticket, ToolCall, ToolGate
from hitl.engine.config.api import Scope
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError

from .upstreams import Route, Upstreams

__all__ = ["FRAMEWORK", "Gateway"]

FRAMEWORK = "mcp"
"""What the approvals the gateway asks for record as their framework (the card's "asked by")."""
log = logging.getLogger(__name__)
_STEP = 5.0
"""Seconds between progress notifications while a call waits for a reviewer."""


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class Gateway:
    """The gated MCP server.

    Args:
        gate: proposes, waits and runs (its service's store is the one ``hitl serve`` watches).
        upstreams: the servers behind the gateway (started by :meth:`start`).
        session: the session approvals and trust grants belong to (stable across reconnects, so a reconnecting
            client picks up decisions made while it was away).
        wait: seconds a call waits for a reviewer before answering "pending review".
        tokens: the clients' bearer tokens (streamable HTTP): each call is made as its token's identity, and a call
            without a valid token with the ``propose`` scope is refused. None over stdio: the configured requester.
    """

    def __init__(
        self, gate: ToolGate, upstreams: Upstreams, *, session: str, wait: float, tokens: TokenBook | None = None
    ) -> None:
        self.gate = gate
        self.upstreams = upstreams
        self.session = session
        self.wait = wait
        self.tokens = tokens
        self.server: Server[Any] = Server(
            "hitl",
            instructions="Tools behind human approval (hitl): some calls wait for a reviewer.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
        )

    async def start(self) -> None:
        """Connect to the upstream servers."""
        await self.upstreams.start()

    async def close(self) -> None:
        """Close the upstream sessions."""
        await self.upstreams.close()

    # -- tools --------------------------------------------------------------------------------------------------
    def caller(self, headers: Mapping[str, str] | None) -> Caller | None:
        """The client a request's ``Authorization: Bearer`` header names (a token with the ``propose`` scope), or
        None. Over stdio (no token book) there is no client token: None."""
        if self.tokens is None or headers is None:
            return None
        found = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        caller = self.tokens.bearer(found)
        return caller if caller is not None and caller.may(Scope.PROPOSE) else None

    def _client(self, ctx: ServerRequestContext[Any]) -> tuple[bool, Caller | None]:
        """Whether the request may go on, and as which client (None over stdio: the configured requester)."""
        if self.tokens is None:
            return True, None
        # Over streamable HTTP the SDK hands each message its HTTP request: the headers of this very call.
        headers = getattr(ctx.request, "headers", None)
        caller = self.caller(headers if isinstance(headers, Mapping) else None)
        return caller is not None, caller

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        allowed, caller = self._client(ctx)
        routes = self.upstreams.routes.items() if allowed else ()
        tools = [
            route.tool.model_copy(update={"name": name})
            for name, route in routes
            if caller is None or caller.sees(name)
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        allowed, caller = self._client(ctx)
        if not allowed:
            return _error("unauthenticated: send 'Authorization: Bearer <token>' with a token that may propose")
        route = self.upstreams.routes.get(params.name)
        if route is None or (caller is not None and not caller.sees(params.name)):
            return _error(f"{params.name} is not a tool of this gateway; list the tools again")
        call = ToolCall(
            params.name,
            dict(params.arguments or {}),
            session=self.session,
            framework=FRAMEWORK,
            schema=route.tool.input_schema,
            agent=_client_name(ctx),
            evidence=route.evidence,
            requester=caller.reviewer if caller is not None else None,
            # The person the client's token acts for (its acts_for in hitl.yaml) confirms a `self` call; over stdio
            # nobody is authenticated, so a `self` call is asked as approve.
            on_behalf_of=caller.acts_for if caller is not None else None,
        )
        try:
            ticket = await self.gate.check(call)
            if ticket.pending:
                ticket = await self._await_decision(ctx, ticket)
        except EngineError as exc:
            return _error(f"{params.name} did not run ({exc.code}): {exc.message}")
        if ticket.pending:
            assert ticket.approval is not None
            text = (
                f"{params.name} is pending review (approval {ticket.approval.id}); nothing ran. Call it again with "
                "the same arguments later to get the reviewer's decision."
            )
            # An error result: the tool produced none of its output (and a client checks a success against the
            # tool's output schema).
            return _error(text)
        if not ticket.runs:
            return _error(f"DENIED: {ticket.message}")
        return await self._run(ticket, route)

    async def _await_decision(self, ctx: ServerRequestContext[Any], ticket: Ticket) -> Ticket:
        """Wait up to ``self.wait`` seconds for a decision, telling the client how long it has waited. The approval
        stays open when the time is up (unlike an agent's own wait, which gives up on it)."""

        async def progress(waited: float, approval: Approval) -> None:
            await _progress(ctx, waited, self.wait, f"waiting for a reviewer: {approval.id}")

        return await self.gate.wait(ticket, timeout=self.wait, keep_open=True, step=_STEP, on_wait=progress)

    async def _run(self, ticket: Ticket, route: Route) -> types.CallToolResult:
        recorded = ticket.approval is not None

        async def upstream(hitl_receipt: str | None = None, **args: Any) -> Any:
            result = await self.upstreams.call(route, args, receipt=hitl_receipt)
            # An approved call's result is recorded in the ledger (a repeat gets it back), so it travels as JSON;
            # an allowed call's goes straight back to the client.
            return result.model_dump(mode="json", by_alias=True, exclude_none=True) if recorded else result

        try:
            out = await self.gate.execute(ticket, upstream, receipt_as="hitl_receipt")
        except EngineError as exc:
            return _error(f"{ticket.call.tool} did not complete ({exc.code}): {exc.message}")
        return out if isinstance(out, types.CallToolResult) else types.CallToolResult.model_validate(out)

    # -- resources and prompts: passed through ----------------------------------------------------------------
    async def _list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        found: list[types.Resource] = []
        for _, session in await self.upstreams.sessions():
            found += (await session.list_resources()).resources
        return types.ListResourcesResult(resources=found)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        for _, session in await self.upstreams.sessions():
            if any(str(r.uri) == str(params.uri) for r in (await session.list_resources()).resources):
                result = await session.read_resource(params.uri)
                assert isinstance(result, types.ReadResourceResult)
                return result
        raise ValueError(f"no upstream offers {params.uri}")

    async def _list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        found: list[types.Prompt] = []
        for _, session in await self.upstreams.sessions():
            found += (await session.list_prompts()).prompts
        return types.ListPromptsResult(prompts=found)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        for _, session in await self.upstreams.sessions():
            if any(p.name == params.name for p in (await session.list_prompts()).prompts):
                result = await session.get_prompt(params.name, params.arguments)
                assert isinstance(result, types.GetPromptResult)
                return result
        raise ValueError(f"no upstream offers the prompt {params.name}")


def _client_name(ctx: ServerRequestContext[Any]) -> str | None:
    info = getattr(getattr(ctx.session, "client_params", None), "client_info", None)
    name = getattr(info, "name", None)
    return str(name)[:120] if name else None


async def _progress(ctx: ServerRequestContext[Any], done: float, total: float, message: str) -> None:
    try:
        await ctx.session.report_progress(done, total, message)
    except Exception as exc:  # a client that went away gets no progress; the approval is unaffected
        log.debug("progress not sent: %s", exc)
