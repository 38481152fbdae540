"""``hitl demo``: the refund example in the local Slack sandbox (browser or scripted), or a CLI-only tour."""
