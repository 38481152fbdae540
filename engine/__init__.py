"""hitl's engine: the domain, the ports, the approval service, the stores, the workflow runner and the run lifecycle.

Internal. Users import from :mod:`hitl` (and :mod:`hitl.testing`); the modules here may change in any release.
The packages stand in layers, each importing only those below it (``tests/test_architecture.py`` checks it):

0. ``errors``: the error tree and its codes
1. ``domain``: pure rules and records (no I/O, time passed in); ``clocks``; ``process`` (worker names, periodic
   work, log context); the claims of a receipt (``receipts.claims``)
2. ``config`` (``hitl.yaml``) and ``workflow`` (workflow files): definitions, checked where they are read
3. ``ports``: the narrow protocols the service and the runner need (the receipts' in ``receipts.ports``)
4. ``storage``: the stores (SQLite, Redis, PostgreSQL), which import nothing above the ports
5. ``oversight`` (the stop switch), ``receipts`` (issuing and claiming them), ``subscribers`` (facts, who observes
   them, webhook events)
6. ``delegation``: who may be handed a role, and the delegations in force
7. ``admission``: the guards that may refuse what the service admits, and the flood caps
8. ``service``: the approval service
9. ``execution``: tools, their schemas, effect claims and the run lease, shared by agents and workflows
10. ``runner``: the workflow runner and its steps
11. ``agents``: the tool gate, ``ask`` and agent runs
12. ``runtime``: composition, the run lifecycle and the background work of a long-running process
13. ``testing``: fakes and the conformance suites (published as :mod:`hitl.testing`)
"""
