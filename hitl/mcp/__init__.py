"""``hitl mcp``: an MCP approval gateway in front of the MCP servers listed in ``hitl.yaml``."""

from .gateway import FRAMEWORK, Gateway
from .serving import serve_http, serve_stdio
from .upstreams import Upstreams

__all__ = ["FRAMEWORK", "Gateway", "Upstreams", "serve_http", "serve_stdio"]
