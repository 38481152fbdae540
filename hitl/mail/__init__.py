"""Approval e-mail: each message a pointer to the decision page, sent by ``hitl serve`` in the background."""
