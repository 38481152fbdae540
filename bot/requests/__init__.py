"""Requests in: verifying and parsing each of Slack's requests once, strictly, and what a request may carry back to
us (button values, signed modal metadata, response URLs). The servers that receive them (HTTP or Socket Mode) stand
above the app, in :mod:`hitl.bot.server`."""
