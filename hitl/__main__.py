"""``python -m hitl`` is the ``hitl`` command."""

from hitl.cli import main

main()
