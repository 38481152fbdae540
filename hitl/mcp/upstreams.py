"""The upstream MCP servers ``hitl mcp`` fronts: one client session each (stdio or streamable HTTP), their tools under
the names the gateway exposes (``<server>.<tool>`` where two servers offer the same name), and a fresh session when
one died (an upstream that crashed mid-call is started again for the next call, never asked to repeat that one).

An upstream's own elicitation during a call reaches the client marked as that upstream's (its name and host, never
hitl's), through the ``on_elicit`` its call was given; with none, or with several calls of that upstream in flight
(which one asks is not known), it is declined. Its answer goes to the upstream only: hitl never reads it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from hitl.engine.config.mcp import McpServerSpec
from hitl.engine.domain.redaction import bounded
from hitl.engine.errors import EngineError, ErrorCode
from hitl.receipts import MCP_META_KEY

__all__ = ["OnElicit", "Route", "Upstreams", "marked"]

log = logging.getLogger(__name__)
OnElicit = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]
"""Shows an upstream's (already marked) elicitation to the client's user and returns their answer."""
_DECLINED = types.ElicitResult(action="decline")


def _labelled(server: str, text: object) -> str:
    """One title or description of an upstream's form, said to be that upstream's (bounded: it is untrusted)."""
    return f"[upstream {server!r}] {bounded(str(text), 300)}"


def _marked_options(server: str, field: dict[str, Any]) -> dict[str, Any]:
    """``field`` with the titles of its choices (``oneOf``/``anyOf`` entries, legacy ``enumNames``) marked."""
    out = dict(field)
    if isinstance(field.get("enumNames"), list):
        out["enumNames"] = [_labelled(server, name) for name in field["enumNames"]]
    for options in ("oneOf", "anyOf"):
        if isinstance(field.get(options), list):
            out[options] = [
                {**o, "title": _labelled(server, o["title"])} if isinstance(o, dict) and "title" in o else o
                for o in field[options]
            ]
    return out


def _marked_field(server: str, key: str, field: object) -> object:
    """One property of an upstream's form schema with its title (its key where it has none), description and
    choices' titles (a multi-select's among its ``items``) marked as the upstream's: a client draws these as labels,
    so none of them may pass for hitl's."""
    if not isinstance(field, dict):
        return field
    out = _marked_options(server, field)
    out["title"] = _labelled(server, field.get("title", key))
    if "description" in field:
        out["description"] = _labelled(server, field["description"])
    if isinstance(field.get("items"), dict):
        out["items"] = _marked_options(server, field["items"])
    return out


def _marked_schema(server: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An upstream's requested schema with every title and description in it marked as the upstream's."""
    out = dict(schema)
    for word in ("title", "description"):
        if word in schema:
            out[word] = _labelled(server, schema[word])
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {key: _marked_field(server, str(key), f) for key, f in properties.items()}
    return out


def marked(server: str, origin: str, params: types.ElicitRequestParams) -> types.ElicitRequestParams:
    """``params`` as the client shows them: said to come from the upstream ``server`` at ``origin``, not from hitl,
    its own text bounded (it is the upstream's, untrusted), for a URL the host it opens, and for a form every title
    and description of its schema marked as the upstream's too (a client draws those as the form's labels)."""
    said = bounded(params.message, 1500)
    if isinstance(params, types.ElicitRequestURLParams):
        host = urlsplit(params.url).hostname or "(no host)"
        head = (
            f"[The upstream MCP server {server!r} ({origin}) asks this, not hitl; the link opens {host}. Your answer "
            "goes to that server only and approves nothing in hitl.]"
        )
        return params.model_copy(update={"message": f"{head}\n{said}"})
    head = (
        f"[The upstream MCP server {server!r} ({origin}) asks this, not hitl. Your answer goes to that server only "
        "and approves nothing in hitl.]"
    )
    schema = _marked_schema(server, params.requested_schema)
    return params.model_copy(update={"message": f"{head}\n{said}", "requested_schema": schema})


@dataclass(frozen=True)
class Route:
    """Where an exposed tool goes: its server and its name there."""

    server: str
    tool: types.Tool

    @functools.cached_property
    def evidence(self) -> str:
        """What the reviewer sees about the tool: its upstream and its description, as untrusted evidence (made once
        per route, not on every call)."""
        description = self.tool.description or "(no description)"
        return bounded(f"MCP server {self.server}, tool {self.tool.name}: {description}", 1500)


class _Link:
    """One upstream's live session, started on first use and again after it broke.

    The transport and session contexts are entered and left by one task of their own: anyio's cancel scopes must be
    left by the task that entered them, and a call that finds the upstream dead runs in some other request's task.
    """

    def __init__(self, name: str, spec: McpServerSpec) -> None:
        self.name = name
        self.spec = spec
        self.session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.asking: list[OnElicit | None] = []
        """The calls in flight, each with where its elicitations go."""
        self.origin = (
            f"host {urlsplit(spec.url).hostname}"
            if spec.url is not None
            else f"a local process, {os.path.basename(spec.command[0]) if spec.command else '?'}"
        )

    async def open(self) -> ClientSession:
        if self.session is not None:
            return self.session
        await self.close()  # whatever is left of a session that broke
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp-upstream-{self.name}")
        self.session = await ready
        return self.session

    async def _own(self, ready: asyncio.Future[ClientSession]) -> None:
        try:
            async with AsyncExitStack() as stack:
                if self.spec.command is not None:
                    params = StdioServerParameters(
                        command=self.spec.command[0],
                        args=self.spec.command[1:],
                        env={**os.environ, **self.spec.env},
                        cwd=self.spec.cwd,
                    )
                    read, write = await stack.enter_async_context(stdio_client(params))
                else:
                    assert self.spec.url is not None
                    read, write = await stack.enter_async_context(streamable_http_client(self.spec.url))
                session = await stack.enter_async_context(
                    ClientSession(read, write, elicitation_callback=self._elicited)
                )
                await session.initialize()
                ready.set_result(session)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the session, else logged
            if not ready.done():
                ready.set_exception(
                    EngineError(
                        f"the upstream MCP server {self.name!r} did not start ({type(exc).__name__}: {exc})",
                        code=ErrorCode.TOOL_FAILED,
                    )
                )
            elif not self._stop.is_set():
                log.warning("upstream MCP server %s stopped: %s", self.name, type(exc).__name__)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None

    async def _elicited(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The upstream asks for input during a call: to that call's client, marked as the upstream's."""
        if len(self.asking) != 1 or self.asking[0] is None:
            return _DECLINED  # no client to ask, or several calls in flight and no telling whose this is
        try:
            return await self.asking[0](marked(self.name, self.origin, params))
        except Exception as exc:  # a client that cannot answer: the upstream hears "decline"
            log.info("an elicitation of %s was not answered: %s", self.name, type(exc).__name__)
            return _DECLINED

    async def close(self) -> None:
        task, self._task, self.session = self._task, None, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except (TimeoutError, Exception) as exc:  # a dead upstream may not close cleanly; it is gone either way
            log.debug("closing upstream %s: %s", self.name, exc)
            task.cancel()


class Upstreams:
    """Every configured upstream and the tools, resources and prompts they offer."""

    def __init__(self, servers: dict[str, McpServerSpec]) -> None:
        self._links = {name: _Link(name, spec) for name, spec in servers.items()}
        self.routes: dict[str, Route] = {}

    async def start(self) -> None:
        """Connect to every upstream and index its tools (a clash is namespaced ``<server>.<tool>``)."""
        offered: dict[str, list[Route]] = {}
        for name, link in self._links.items():
            session = await link.open()
            for tool in (await session.list_tools()).tools:
                offered.setdefault(tool.name, []).append(Route(name, tool))
        self.routes = {}
        for tool_name, routes in offered.items():
            if len(routes) == 1:
                self.routes[tool_name] = routes[0]
            else:
                for route in routes:
                    self.routes[f"{route.server}.{tool_name}"] = route

    async def close(self) -> None:
        """Close every upstream session."""
        for link in self._links.values():
            await link.close()

    async def call(
        self, route: Route, args: dict[str, Any], *, receipt: str | None = None, on_elicit: OnElicit | None = None
    ) -> types.CallToolResult:
        """Call the upstream tool once, with the execution's ``receipt`` (if any) in the request's ``_meta`` under
        :data:`~hitl.receipts.MCP_META_KEY`, as the MCP specification asks of a vendor's metadata. A transport
        failure closes the session (the next call starts it again) and raises: the caller records the call as
        failed, it is never repeated here. The upstream's elicitations meanwhile go to ``on_elicit`` (marked as its),
        declined without one."""
        link = self._links[route.server]
        session = await link.open()
        # An open map (extra_items): the vendor key is not one the TypedDict names.
        meta = cast(types.RequestParamsMeta, {MCP_META_KEY: receipt}) if receipt is not None else None
        link.asking.append(on_elicit)
        try:
            result = await session.call_tool(route.tool.name, args, meta=meta)
        except Exception as exc:
            await link.close()
            raise EngineError(
                f"the upstream MCP server {route.server!r} failed during {route.tool.name} ({type(exc).__name__}); "
                "it may or may not have acted: check before asking again",
                code=ErrorCode.TOOL_FAILED,
            ) from exc
        finally:
            link.asking.remove(on_elicit)
        if not isinstance(result, types.CallToolResult):
            raise EngineError(f"{route.server} answered {route.tool.name} with {type(result).__name__}")
        return result

    async def sessions(self) -> list[tuple[str, ClientSession]]:
        """Every upstream by name, with its session (opened on first use)."""
        return [(name, await link.open()) for name, link in self._links.items()]
