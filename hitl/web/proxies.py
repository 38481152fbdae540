"""Who a request comes from, behind a TLS proxy: the peer's address, unless the peer is one of
``web.trusted_proxies``; then ``X-Forwarded-For`` is read from its right end, past every trusted hop, to the first
hop that is not one of ours (what a client writes to the left of it is not believed)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aiohttp import web

__all__ = ["Network", "client_address", "networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    """``web.trusted_proxies`` as networks (already validated with the configuration)."""
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def _trusted(address: str, trusted: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def client_address(request: web.Request, trusted: tuple[Network, ...]) -> str:
    """The address the sign-in rate limit is keyed on: the peer's, or (from a trusted proxy) the rightmost hop of
    ``X-Forwarded-For`` that is not a trusted proxy. A hop that is not an address stops the walk at the trusted
    hop after it: the proxies' own bucket then, never one the client named (which it could vary at will)."""
    peer = request.remote or "unknown"
    if not trusted or not _trusted(peer, trusted):
        return peer
    hops = [h.strip() for value in request.headers.getall("X-Forwarded-For", []) for h in value.split(",")]
    client = peer
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return client
        client = hop
        if not _trusted(hop, trusted):
            return hop
    return client
