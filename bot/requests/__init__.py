"""Requests in: serving Slack's requests (HTTP or Socket Mode), verifying and parsing each once, strictly, and
what a request may carry back to us (button values, signed modal metadata, response URLs)."""
