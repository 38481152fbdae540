"""The durable workflow runner: one run of a workflow file, step by step, resumable without re-running a step."""
