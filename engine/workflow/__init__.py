"""Workflow files: their definitions (steps, patterns, agents), parsed and checked once where they are read."""
