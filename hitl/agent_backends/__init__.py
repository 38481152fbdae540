"""Workflow agent steps on Strands Agents, and the scripted model that makes them run offline."""

from __future__ import annotations

from hitl.agent_backends.backend import StrandsAgents
from hitl.agent_backends.scripted import ScriptedModel, load_script

__all__ = ["ScriptedModel", "StrandsAgents", "load_script"]
