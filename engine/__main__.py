"""``python -m engine`` is the ``hitl`` command."""

from engine.cli import main

main()
