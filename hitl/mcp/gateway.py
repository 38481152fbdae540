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

A client that negotiated the 2026-07-28 protocol is not held open: the call answers ``input_required`` at once, with
a URL-mode elicitation sending its user to the approval's decision page (``web.public_url``; without one, only the
text "pending review (approval apr_…)" in the result's ``_meta``) and a sealed ``requestState`` (:mod:`.request_state`)
naming the approval. The client retries with that state; each retry waits up to ``mcp.wait`` for the decision and
runs the call only when the store says approved, exactly once (a later retry gets the recorded result). Whatever the
client sends as ``inputResponses`` is never read as a reviewer's decision: the one answer read is a ``self`` call's
confirmation form, asked only of the person the call acts for when the client's token acts for them (:mod:`.own_form`).
An upstream's own question during the approved call ends a round too, marked as the upstream's; the answer on the
retry goes to that upstream only (:mod:`.upstream_rounds`).

Who asks: over stdio, the gateway's configured requester (``hitl.yaml``'s ``requester``: the process that started it);
over streamable HTTP, each client's bearer token (``api.tokens`` with the ``propose`` scope), so trust, approvals and
their waits belong to that client's identity and no other's. A tool at tier ``self`` is confirmed by the person the
client's token acts for (its ``acts_for``); over stdio no one is authenticated, so such a call is asked as
``approve`` of the tool's role.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hitl.api.tokens import Caller, TokenBook
from hitl.engine.agents.gate import GateRefused, Ticket, ToolCall, ToolGate
from hitl.engine.config.api import Scope
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, NotFound

from .own_form import FORM_REQUEST, form_request, may_confirm, record_answer
from .person import (
    ASK_PERSON,
    REQUEST_APPROVAL,
    answer_of,
    ask_person_tool,
    decision_of,
    hand_over,
    refused,
    request_approval_tool,
)
from .request_state import Opened, RequestStates, StateRefused
from .upstream_rounds import UPSTREAM_REQUEST, Asked, Relays
from .upstreams import OnElicit, Route, Upstreams

__all__ = ["FRAMEWORK", "Gateway"]

FRAMEWORK = "mcp"
"""What the approvals the gateway asks for record as their framework (the card's "asked by")."""
log = logging.getLogger(__name__)
_STEP = 5.0
"""Seconds between progress notifications while a call waits for a reviewer."""
STATUS_KEY = "io.github.hitl-gate/status"
"""Where an ``input_required`` answer's ``_meta`` says, as text, what the call waits for."""
_RAN = (Status.EXECUTING, Status.EXECUTED, Status.FAILED)
"""An approval whose one execution has started: a retry gets its outcome, never a new approval."""
REVIEW_REQUEST = "hitl_review"
"""The key of the URL elicitation an ``input_required`` answer asks the client to show its user."""


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
        states: seals the ``requestState`` of 2026-07-28 clients (None: those clients wait as older ones do).
        public_url: ``web.public_url``, where the decision page of an approval is (None: no web inbox).
        person_tools: also serve ``request_approval``, and ``ask_person`` where ``mcp.ask_person`` configures it
            (:mod:`.person`).
    """

    def __init__(
        self,
        gate: ToolGate,
        upstreams: Upstreams,
        *,
        session: str,
        wait: float,
        tokens: TokenBook | None = None,
        states: RequestStates | None = None,
        public_url: str | None = None,
        person_tools: bool = False,
    ) -> None:
        self.gate = gate
        self.upstreams = upstreams
        self.session = session
        self.wait = wait
        self.tokens = tokens
        self.states = states
        self.public_url = public_url
        self.person_tools = person_tools
        self.relays = Relays(patience=states.ttl if states is not None else 600.0)
        """The upstream calls of this process whose own questions wait for a 2026-07-28 client's retry."""
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
        if self.person_tools and allowed:
            declared = {
                name: spec.schema_
                for name, spec in self.gate.service.policy.spec.tools.items()
                if spec.schema_ is not None and name != ASK_PERSON and (caller is None or caller.sees(name))
            }
            tools.append(request_approval_tool(declared))
            question = self.gate.service.policy.spec.declared_schema(ASK_PERSON)
            if question is not None and (caller is None or caller.sees(ASK_PERSON)):
                tools.append(ask_person_tool(question))
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        allowed, caller = self._client(ctx)
        if not allowed:
            return _error("unauthenticated: send 'Authorization: Bearer <token>' with a token that may propose")
        if self.person_tools and params.name == REQUEST_APPROVAL:
            return await self._request_approval(ctx, params, caller)
        if self.person_tools and params.name == ASK_PERSON:
            return await self._ask_person(ctx, params, caller)
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
        if self.states is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await self._call_in_rounds(ctx, params, call, route, caller)
        try:
            ticket = await self.gate.check(call)
            if ticket.pending:
                ticket = await self._await_decision(ctx, ticket)
        except EngineError as exc:
            return _error(f"{params.name} did not run ({exc.code}): {exc.message}")
        return await self._answer(ticket, route, relay=_relay(ctx))

    async def _answer(self, ticket: Ticket, route: Route, *, relay: OnElicit | None = None) -> types.CallToolResult:
        """What a decided (or still pending) call answers an older client: its result, the denial, or "pending"."""
        if ticket.pending:
            assert ticket.approval is not None
            text = (
                f"{ticket.call.tool} is pending review (approval {ticket.approval.id}); nothing ran. Call it again "
                "with the same arguments later to get the reviewer's decision."
            )
            # An error result: the tool produced none of its output (and a client checks a success against the
            # tool's output schema).
            return _error(text)
        if not ticket.runs:
            return _error(f"DENIED: {ticket.message}")
        return await self._run(ticket, route, relay)

    async def _request_approval(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, caller: Caller | None
    ) -> types.CallToolResult:
        """``request_approval``: an action of a tool ``hitl.yaml`` declares, asked as the MCP principal (never a
        name in the arguments), waited on up to ``mcp.wait``, and handed to this caller once when approved."""
        given = dict(params.arguments or {})
        tool, action = given.get("tool"), given.get("args")
        if set(given) - {"tool", "args"} or not isinstance(tool, str) or not isinstance(action, dict):
            return _error(
                f"{REQUEST_APPROVAL} takes exactly {{tool, args}}: a tool name and its arguments (invalid_input)"
            )
        declared = self.gate.service.policy.spec.declared_schema(tool)
        if declared is None or tool == ASK_PERSON or (caller is not None and not caller.sees(tool)):
            return _error(
                f"{tool[:100]!r} is not a tool hitl.yaml declares with an argument schema; list the tools for the "
                "ones you may ask about (invalid_input)"
            )
        call = ToolCall(
            tool,
            action,
            session=self.session,
            framework=FRAMEWORK,
            schema=declared,
            agent=_client_name(ctx),
            requester=caller.reviewer if caller is not None else None,
            # As for a gated call: the person behind it confirms a `self` one and never decides another.
            on_behalf_of=caller.acts_for if caller is not None else None,
        )
        asked = await self._asked(ctx, call)
        return asked if isinstance(asked, types.CallToolResult) else decision_of(asked)

    async def _ask_person(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, caller: Caller | None
    ) -> types.CallToolResult:
        """``ask_person``: the question (its one argument; a requester or an answer among them is refused) asked
        as the MCP principal, waited on up to ``mcp.wait``, and its answer handed to this caller once."""
        given = dict(params.arguments or {})
        declared = self.gate.service.policy.spec.declared_schema(ASK_PERSON)
        if declared is None or (caller is not None and not caller.sees(ASK_PERSON)):
            return _error(f"{ASK_PERSON} is not served here: hitl.yaml has no mcp.ask_person (invalid_input)")
        if set(given) != {"question"} or not isinstance(given["question"], str):
            return _error(f"{ASK_PERSON} takes exactly {{question}}: the question as text (invalid_input)")
        call = ToolCall(
            ASK_PERSON,
            {"question": given["question"]},
            session=self.session,
            framework=FRAMEWORK,
            schema=declared,
            agent=_client_name(ctx),
            requester=caller.reviewer if caller is not None else None,
        )
        asked = await self._asked(ctx, call)
        return asked if isinstance(asked, types.CallToolResult) else answer_of(asked)

    async def _asked(self, ctx: ServerRequestContext[Any], call: ToolCall) -> Ticket | types.CallToolResult:
        """A person tool's call asked, waited on, and handed over once when approved; or the tool error to answer
        (still pending, refused)."""
        tool = call.tool
        try:
            ticket = await self.gate.check(call)
            if ticket.pending:
                ticket = await self._await_decision(ctx, ticket)
            if ticket.pending:
                assert ticket.approval is not None
                return _error(
                    f"{tool} is pending review (approval {ticket.approval.id}); ask again with the same arguments "
                    "later to get the reviewer's decision"
                )
            if ticket.runs:
                ticket = await hand_over(self.gate, ticket)
        except GateRefused as exc:
            return refused(exc)
        except EngineError as exc:
            return _error(f"{tool} was not asked ({exc.code}): {exc.message}")
        return ticket

    # -- 2026-07-28 clients: input_required and retries ------------------------------------------------------
    async def _call_in_rounds(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        call: ToolCall,
        route: Route,
        caller: Caller | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One round of a 2026-07-28 client's call. Of ``params.input_responses`` only a ``self`` call's
        confirmation form is read, and only from its person (:mod:`.own_form`): any other answer (a form, a URL's
        "accept") approves nothing; the store alone says."""
        assert self.states is not None
        who = _principal(caller, self.session)
        opened = None
        if params.request_state is not None:
            try:
                opened = self.states.open(params.request_state, tool=params.name, args=call.args, principal=who)
            except StateRefused as exc:
                await self._refused(exc, who, params.name)
                raise MCPError(types.INVALID_PARAMS, f"{exc.code}: {exc.message}", {"code": str(exc.code)}) from None
        try:
            if opened is not None and opened.asking is not None:
                answer = (params.input_responses or {}).get(UPSTREAM_REQUEST)
                step = await self.relays.answer(
                    opened.asking, principal=who, approval_id=opened.approval_id, answer=answer
                )
                if step is not None:
                    return self._relayed(step, call, opened.approval_id, who)
                if not opened.approval_id:  # an allowed call's conversation, gone: nothing recorded to hand back
                    return _error(
                        f"{params.name}: the upstream's question is no longer open here (another gateway process, a "
                        "restart, or no answer in time: the upstream heard decline); call the tool again"
                    )
            if opened is not None:
                return await self._retry(ctx, call, route, opened, caller, params.input_responses)
            ticket = await self.gate.check(call)
        except EngineError as exc:
            return _error(f"{params.name} did not run ({exc.code}): {exc.message}")
        if ticket.pending:
            return self._input_required(ticket, caller, send_to_page=True)
        return await self._answer_in_rounds(await self._bound_to_approval(ticket), route, who)

    async def _retry(
        self,
        ctx: ServerRequestContext[Any],
        call: ToolCall,
        route: Route,
        opened: Opened,
        caller: Caller | None,
        answers: Mapping[str, Any] | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A retry carrying a state this gateway sealed: the approval it names, waited on, run once when approved.
        A state past its life finds the call's approval by the call's dedupe key instead, unless the approval it
        names has run: then its recorded result (asking again would make a second approval). A confirmation form's
        answer in ``answers`` is recorded first, when it is the person's (:func:`.own_form.record_answer`)."""
        try:
            approval: Approval | None = await self.gate.service.store.approvals.get(opened.approval_id)
        except NotFound:  # purged since: the call's dedupe key asks again
            approval = None
        if approval is not None and (approval.session_id != self.session or approval.tool != call.tool):
            approval = None
        if answers and FORM_REQUEST in answers and not opened.expired:
            who = _principal(caller, self.session)
            await record_answer(self.gate.service, approval, caller, answers, opened.shown, actor=who)
            if approval is not None:
                approval = await self.gate.service.store.approvals.get(approval.id)
        if approval is not None and (not opened.expired or approval.status in _RAN):
            ticket = await self.gate.ticket_for(call, approval)
        else:
            ticket = await self.gate.check(call)
        if ticket.pending:
            ticket = await self._await_decision(ctx, ticket)
        if ticket.pending:
            return self._input_required(ticket, caller, send_to_page=False)
        if ticket.approval is not None and ticket.approval.status is Status.FAILED:
            return _error(
                f"{call.tool} did not complete (approval {ticket.approval.id}): the upstream may or may not have "
                "acted; check before asking again"
            )
        return await self._answer_in_rounds(
            await self._bound_to_approval(ticket), route, _principal(caller, self.session)
        )

    async def _answer_in_rounds(
        self, ticket: Ticket, route: Route, who: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A decided call's answer to a 2026-07-28 client: its result, or the upstream's own question to it
        (:mod:`.upstream_rounds`), relayed on the retry. Whatever the answer, the call was decided before it ran."""
        if ticket.pending or not ticket.runs:
            return await self._answer(ticket, route)
        approval_id = ticket.approval.id if ticket.approval is not None else ""

        async def run(relay: OnElicit) -> types.CallToolResult:
            return await self._run(ticket, route, relay)

        step = await self.relays.start(run, principal=who, approval_id=approval_id)
        return self._relayed(step, ticket.call, approval_id, who)

    def _relayed(
        self, step: types.CallToolResult | Asked, call: ToolCall, approval_id: str, who: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The upstream call's result, or ``input_required`` carrying its question (marked as its) and a state
        naming the conversation, bound to this call and principal."""
        if isinstance(step, types.CallToolResult):
            return step
        assert self.states is not None
        state = self.states.seal(
            approval_id=approval_id, tool=call.tool, args=call.args, principal=who, asking=step.conversation
        )
        text = f"{call.tool} is running upstream, and the upstream server asks its own question (not hitl's)"
        return types.InputRequiredResult(
            input_requests={UPSTREAM_REQUEST: types.ElicitRequest(params=step.params)},
            request_state=state,
            _meta={STATUS_KEY: text},
        )

    async def _bound_to_approval(self, ticket: Ticket) -> Ticket:
        """The ticket as a call bound to its approval: every retry of it is the same call, so a repeat after it
        ran gets the recorded result instead of a second run (the ledger's claim keeps it to one run on every
        replica)."""
        if ticket.approval is None:
            return ticket
        bound = dataclasses.replace(ticket.call, call_id=f"mcp-state:{ticket.approval.id}")
        return await self.gate.ticket_for(bound, ticket.approval)

    def _input_required(
        self, ticket: Ticket, caller: Caller | None, *, send_to_page: bool
    ) -> types.InputRequiredResult:
        """``input_required``: the sealed state naming the approval and, the first time, the decision page to open;
        every time, to a ``self`` call's person, the confirmation form (the state keeps the view it showed)."""
        assert self.states is not None and ticket.approval is not None
        approval = ticket.approval
        who = _principal(caller, self.session)
        text = f"{ticket.call.tool} is pending review (approval {approval.id}); nothing ran"
        if may_confirm(approval, caller):
            view = self.gate.service.present(approval)
            shown = (approval.version, approval.action_hash, view.digest())
            state = self.states.seal(
                approval_id=approval.id, tool=ticket.call.tool, args=ticket.call.args, principal=who, shown=shown
            )
            return types.InputRequiredResult(
                input_requests={FORM_REQUEST: form_request(view)}, request_state=state, _meta={STATUS_KEY: text}
            )
        state = self.states.seal(approval_id=approval.id, tool=ticket.call.tool, args=ticket.call.args, principal=who)
        requests: dict[str, types.InputRequest] | None = None
        if send_to_page and self.public_url is not None:
            url = f"{self.public_url}/inbox/approvals/{approval.id}"
            message = (
                f"{ticket.call.tool} needs a person's approval ({approval.id}). Open hitl's decision page: an "
                "eligible reviewer signs in there and decides. Answering here approves nothing."
            )
            requests = {
                REVIEW_REQUEST: types.ElicitRequest(params=types.ElicitRequestURLParams(message=message, url=url))
            }
        return types.InputRequiredResult(input_requests=requests, request_state=state, _meta={STATUS_KEY: text})

    async def _refused(self, exc: StateRefused, who: str, tool: str) -> None:
        """Audit a refused state (who presented it, which call, why) before the client hears of it."""
        service = self.gate.service
        entry = AuditEntry(
            at=service.clock.now(),
            actor=who[:200],
            event="refused",
            outcome=str(exc.code),
            detail=f"mcp tools/call {tool[:100]}: requestState {exc.reason}",
        )
        await service.store.audit.append(entry)

    async def _await_decision(self, ctx: ServerRequestContext[Any], ticket: Ticket) -> Ticket:
        """Wait up to ``self.wait`` seconds for a decision, telling the client how long it has waited. The approval
        stays open when the time is up (unlike an agent's own wait, which gives up on it)."""

        async def progress(waited: float, approval: Approval) -> None:
            await _progress(ctx, waited, self.wait, f"waiting for a reviewer: {approval.id}")

        return await self.gate.wait(ticket, timeout=self.wait, keep_open=True, step=_STEP, on_wait=progress)

    async def _run(self, ticket: Ticket, route: Route, relay: OnElicit | None) -> types.CallToolResult:
        recorded = ticket.approval is not None

        async def upstream(hitl_receipt: str | None = None, **args: Any) -> Any:
            result = await self.upstreams.call(route, args, receipt=hitl_receipt, on_elicit=relay)
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


def _principal(caller: Caller | None, session: str) -> str:
    """Who a request state is bound to: the bearer token over ``--http``; over stdio, where one client started the
    gateway, the configured session."""
    return f"token:{caller.token}" if caller is not None else f"stdio-session:{session}"


def _relay(ctx: ServerRequestContext[Any]) -> OnElicit | None:
    """Where an upstream's elicitation during this (handshake-era) request goes: to this client, as a request of
    its own related to this call, when it said it can answer one. A 2026-07-28 client cannot be asked in the middle
    of a call: its upstream's questions end its rounds instead (:mod:`.upstream_rounds`)."""
    capabilities = getattr(getattr(ctx.session, "client_params", None), "capabilities", None)
    if getattr(capabilities, "elicitation", None) is None:
        return None

    async def ask(params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            ref = params.elicitation_id or uuid.uuid4().hex
            return await ctx.session.elicit_url(params.message, params.url, ref, related_request_id=ctx.request_id)
        return await ctx.session.elicit_form(params.message, params.requested_schema, related_request_id=ctx.request_id)

    return ask


def _client_name(ctx: ServerRequestContext[Any]) -> str | None:
    info = getattr(getattr(ctx.session, "client_params", None), "client_info", None)
    name = getattr(info, "name", None)
    return str(name)[:120] if name else None


async def _progress(ctx: ServerRequestContext[Any], done: float, total: float, message: str) -> None:
    try:
        await ctx.session.report_progress(done, total, message)
    except Exception as exc:  # a client that went away gets no progress; the approval is unaffected
        log.debug("progress not sent: %s", exc)
