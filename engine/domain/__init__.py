"""The pure approval domain: models, state machine, hashing, policy, redaction, reviewers.

Nothing here performs I/O or reads the clock: the current time is always an argument.
"""
