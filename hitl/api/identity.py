"""``/whoami``: who the presented token acts as. Any valid token may ask (it learns only about itself), so a client
can say which identity it uses before it acts, and notice a mismatch with what its user claimed."""

from __future__ import annotations

from aiohttp import web

from .context import CALLER
from .models import TokenView
from .routes import Endpoint
from .tokens import Caller

__all__ = ["routes"]


async def whoami(request: web.Request) -> web.Response:
    """Who this token acts as, and what it may do."""
    caller: Caller = request[CALLER]
    view = TokenView(
        reviewer=caller.reviewer,
        token=caller.token,
        scopes=sorted(str(s) for s in caller.scopes),
        roles=sorted(caller.roles) if caller.roles is not None else None,
        tools=sorted(caller.tools) if caller.tools is not None else None,
        audience=caller.audience,
    )
    return web.json_response(view.model_dump(mode="json"))


def routes() -> list[Endpoint]:
    """The caller's own route."""
    return [Endpoint("GET", "/whoami", whoami, TokenView)]
