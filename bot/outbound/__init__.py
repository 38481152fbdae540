"""Calls out: everything hitl says to Slack on its own, paced within Slack's limits: the notifier (cards, card
updates, reminders, FYIs, halt notices, hand-ons), thread replies, Home tabs, and the directory lookups."""
