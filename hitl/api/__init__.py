"""The HTTP API under ``/api/v1``: reviewers and agents beyond Slack, on the same store and the same rules.

The server side (``hitl.api.app``) needs the ``serve`` extra (aiohttp); this package's root, its token helpers and its
models do not, so the CLI talks to a server and mints tokens without it.
"""

from hitl.api.tokens import mint_token, token_hash

__all__ = ["mint_token", "token_hash"]
