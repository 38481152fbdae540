"""The route table: every endpoint of ``/api/v1`` with its contract (the models it reads and answers, the errors it
may give). The router is built from it and the OpenAPI document is generated from it (:mod:`.openapi`), so the two
cannot drift apart: a route without its contract cannot be added.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web
from pydantic import BaseModel

__all__ = ["Endpoint", "Handler"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Endpoint:
    """One route and its contract.

    Args:
        method: the HTTP method.
        path: the path under ``/api/v1``, with ``{name}`` for each path parameter.
        handler: the aiohttp handler; the first line of its docstring is the operation's summary.
        ok: the model of a successful answer.
        errors: the status codes of this route's own refusals (the ones every route may give are added).
        body: the model of the JSON body, for a route that reads one.
        query: the model of the query parameters, for a route that reads them.
        status: the status of a successful answer.
    """

    method: Literal["GET", "POST", "DELETE"]
    path: str
    handler: Handler
    ok: type[BaseModel]
    errors: tuple[int, ...] = ()
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    status: int = 200

    @property
    def summary(self) -> str:
        """The first line of the handler's docstring."""
        doc = (self.handler.__doc__ or "").strip()
        if not doc:
            raise ValueError(f"{self.method} {self.path}: its handler needs a docstring (the operation's summary)")
        return doc.splitlines()[0].rstrip(".")

    @property
    def path_params(self) -> list[str]:
        """The names of the path's ``{name}`` parameters, in order."""
        return re.findall(r"\{(\w+)\}", self.path)

    def route(self) -> web.RouteDef:
        """The aiohttp route."""
        return web.route(self.method, self.path, self.handler)
