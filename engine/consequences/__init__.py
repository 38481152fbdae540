"""Running a tool's consequence (:mod:`hitl.engine.domain.consequences`) where it cannot hurt: in ``hitl serve`` in
a worker process of its own with a scrubbed environment, killed at its time bound
(:class:`~.workers.WorkerConsequences`); elsewhere in the process that holds the tool, in a thread with the time
bound (:class:`~.threads.ThreadConsequences`). Either way a bounded number run at once per tool, and the approval is
asked without the consequence, at once when busy and at the bound when it runs too long."""
