"""A local stand-in for Slack: the Web API subset the bot uses, validated the way Slack validates it."""
