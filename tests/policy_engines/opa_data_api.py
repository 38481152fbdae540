"""OPA's Data API (``POST /v1/data/<path>`` with ``{"input": ...}`` -> ``{"result": ...}``), served on 127.0.0.1 by a
real HTTP server over the real OPA: the OPA Go library, as ``opa-golib-python-bindings`` embeds it. No `opa` binary
or Go toolchain is needed. ``slow``: every request is held until the server stops (an OPA that never answers)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from opa_bindings import OpaEngine, OpaUndefinedError

from tests.local_http import served

__all__ = ["opa_data_api"]


@contextmanager
def opa_data_api(*policies: Path, slow: bool = False) -> Iterator[str]:
    """An OPA Data API serving ``policies`` (Rego files); yields its base URL."""
    engine = OpaEngine()
    for path in policies:
        engine.add_policy(path.name, path.read_text())
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            if slow:
                released.wait()
                return
            if not self.path.startswith("/v1/data/"):
                self._reply(404, {"code": "not_found"})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            document = self.path.removeprefix("/v1/data/").replace("/", ".")
            try:
                self._reply(200, {"result": engine.eval_document(document, body.get("input"))})
            except OpaUndefinedError:
                self._reply(200, {})  # OPA's answer for an undefined document: no "result"

        def _reply(self, status: int, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
            pass

    try:
        with served(Handler) as url:
            try:
                yield url
            finally:
                released.set()  # before the shutdown: a held request ends
    finally:
        engine.close()
