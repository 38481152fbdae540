"""The HTTP API under ``/api/v1``: reviewers and agents beyond Slack, on the same store and the same rules."""

from .app import PREFIX, api_app
from .tokens import mint_token, token_hash

__all__ = ["PREFIX", "api_app", "mint_token", "token_hash"]
