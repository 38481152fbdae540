"""hitl Slack bot (arrives with the Slack bot issue)."""
