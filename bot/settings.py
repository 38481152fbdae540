"""Bot settings from the environment (pydantic-settings), overridable by ``hitl serve`` flags."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from hitl.bot.errors import BotError, BotErrorCode

__all__ = ["BotSettings"]


class BotSettings(BaseSettings):
    """Where Slack, the store and the config are. Field names map to the documented env vars."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    hitl_store: str = "sqlite:///.hitl/hitl.db"
    hitl_config: str | None = None
    hitl_approval_channel: str | None = None
    sweep_interval: float = Field(default=5.0, gt=0)
    """Seconds between expiry/reminder sweeps."""
    hitl_retention: str | None = None
    """How long ended runs, final approvals, claims and done jobs are kept (default 30d; ``never``)."""
    hitl_audit_retention: str | None = None
    """How long the audit trail is kept, at least the retention (default 400d; ``never``)."""
    hitl_access_log: bool = False
    """Log a line per HTTP request (off by default: ~70 µs a click, and the audit trail says who decided what)."""

    def require_http(self) -> None:
        """HTTP mode verifies every request with the signing secret; refuse to start without one."""
        if self.slack_bot_token is None or not self.slack_bot_token.get_secret_value():
            raise BotError(
                "SLACK_BOT_TOKEN is not set; copy the Bot User OAuth Token (xoxb-…) from your app's "
                "OAuth & Permissions page",
                code=BotErrorCode.MISCONFIGURED,
            )
        if self.slack_signing_secret is None or not self.slack_signing_secret.get_secret_value():
            raise BotError(
                "SLACK_SIGNING_SECRET is not set; copy it from your app's Basic Information page "
                "(or use Socket Mode with SLACK_APP_TOKEN and --socket)",
                code=BotErrorCode.MISCONFIGURED,
            )

    def require_socket(self) -> None:
        if self.slack_bot_token is None or not self.slack_bot_token.get_secret_value():
            raise BotError("SLACK_BOT_TOKEN is not set", code=BotErrorCode.MISCONFIGURED)
        if self.slack_app_token is None or not self.slack_app_token.get_secret_value().startswith("xapp-"):
            raise BotError(
                "Socket Mode needs SLACK_APP_TOKEN (xapp-…, with the connections:write scope)",
                code=BotErrorCode.MISCONFIGURED,
            )

    @property
    def api_base(self) -> str:
        return self.slack_api_url if self.slack_api_url.endswith("/") else self.slack_api_url + "/"
