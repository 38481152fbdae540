"""hitl's engine: the domain, the ports, the approval service, the stores, the workflow runner and the run lifecycle.

Internal. Users import from :mod:`hitl` (and :mod:`hitl.testing`); the modules here may change in any release.
The packages stand in layers, each importing only those below it (``tests/test_architecture.py`` checks it):

1. ``domain``: pure rules and records (no I/O, time passed in); ``errors``, ``clocks``, ``log_context``, ``tasks``
2. ``config`` (``hitl.yaml``) and ``workflow`` (workflow files): definitions, checked where they are read
3. ``ports``: the narrow protocols the service and the runner need
4. ``storage`` (SQLite, Redis), ``events`` and ``service`` (the approval service)
5. ``execution``: tools, their schemas, effect claims and the run lease, shared by agents and workflows
6. ``runner``: the workflow runner and its steps
7. ``agents``: the tool gate, ``ask`` and agent runs
8. ``runtime``: composition, the run lifecycle and the background work of a long-running process
9. ``testing``: fakes and the conformance suites (published as :mod:`hitl.testing`)
"""
