"""Framework adapters: how agent frameworks meet hitl. They depend on the engine only, never on Slack."""
