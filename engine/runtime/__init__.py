"""A process's runtime: composition of a run's context, the run lifecycle, and background work of ``hitl serve``."""
