"""hitl's Slack adapter: the Bolt app, its listeners, Block Kit cards, escaping, and the Slack notifier and run
reporter that implement the engine's ports. It composes nothing itself: ``hitl serve`` wires it to the engine."""
