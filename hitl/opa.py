"""OPA over its HTTP Data API: ``POST {url}/v1/data/{path}`` with ``{"input": request}``, whose ``result`` is the
decision document (:func:`~hitl.engine.domain.policy_source.from_rego`).

The call is blocking I/O (the standard library's HTTP client, so the engine loads no transport), run on a thread
pool of its own and bounded by the source's ``timeout`` twice: the socket's and the caller's wait. An error, a
timeout, a non-200 status or an unreadable body is a failed answer: the call asks a person.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hitl.engine.domain.policy_source import ExternalAnswer, OpaSource, from_rego

__all__ = ["OpaDataApi"]

_MAX_BODY = 65536
"""The most of an answer read: a decision document is small; a larger body is not one."""


class OpaDataApi:
    """One rule's OPA document, asked over HTTP: the engine's :class:`~hitl.engine.ports.PolicyEngine` for an
    ``opa:`` source, given to it by the composition root (the engine sends no HTTP request itself)."""

    def __init__(self, source: OpaSource) -> None:
        self.source = source
        self._url = f"{source.url.rstrip('/')}/v1/data/{source.path}"
        # Its own threads: a slow OPA holds these, never the loop's default pool that other work shares.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hitl-opa")

    def problems(self) -> list[str]:
        """Nothing to load here: the Rego lives in OPA (its own ``opa check`` checks it)."""
        return []

    async def answer(self, request: Mapping[str, Any]) -> ExternalAnswer:
        """OPA's decision, mapped; within the source's ``timeout`` or failed."""
        body = json.dumps({"input": request}, default=str).encode()
        loop = asyncio.get_running_loop()
        try:
            raw = await asyncio.wait_for(loop.run_in_executor(self._pool, self._post, body), self.source.timeout)
        except TimeoutError:
            return ExternalAnswer.failed(f"OPA did not answer within {self.source.timeout:g}s")
        except (OSError, ValueError) as exc:  # refused, reset, HTTP error status, bad JSON
            return ExternalAnswer.failed(f"OPA could not be asked: {exc}")
        if not isinstance(raw, dict) or "result" not in raw:
            return ExternalAnswer.failed(f"OPA has no document at {self.source.path} (undefined)")
        return from_rego(raw["result"])

    def _post(self, body: bytes) -> Any:
        import urllib.error
        import urllib.request  # here: `import hitl` (whose ApprovalService names this class) stays light

        class _NoRedirect(urllib.request.HTTPRedirectHandler):
            # A redirect is not OPA's decision: followed, a POST turns into a GET of whatever the Location names,
            # whose answer would decide the call. Refused, the 3xx is an HTTP error: a failed answer, a person asks.
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        req = urllib.request.Request(self._url, data=body, method="POST", headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=self.source.timeout) as resp:  # http(s) only: checked at load
                data = resp.read(_MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            exc.close()  # its response, unread: closed here rather than left to the collector
            raise OSError(f"HTTP {exc.code} from OPA") from None
        if len(data) > _MAX_BODY:
            raise ValueError(f"an answer over {_MAX_BODY} bytes is not a decision")
        return json.loads(data)
