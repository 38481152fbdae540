"""A stand-in HTTP service on 127.0.0.1: a ``http.server`` handler served by a thread of this process on a free port,
for the life of a block (an OPA Data API, a server that misbehaves as a hijacked address could)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["served"]


@contextmanager
def served(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` answering on 127.0.0.1 until the block ends; yields the base URL. A request still held at the
    end does not hold the shutdown up (its thread is a daemon)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
