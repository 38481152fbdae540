"""What one running process is made of, below everything that runs in it: the unique names of its workers, its
periodic background work, and what its log lines are about."""
