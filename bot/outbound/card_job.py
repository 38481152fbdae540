"""The name of the durable job that brings an approval's card up to date, apart from the worker that applies it
(:mod:`~hitl.bot.outbound.updates`), so a command that only queues one (``hitl withdraw`` against the store) loads
no Slack client to name it."""

from __future__ import annotations

__all__ = ["CARD_JOB"]

CARD_JOB = "card"
"""The durable job that brings an approval's card up to date (queued by a decision's own store step)."""
