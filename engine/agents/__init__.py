"""Agents outside a workflow: the tool gate every framework adapter calls, ``ask``, and agent runs."""
