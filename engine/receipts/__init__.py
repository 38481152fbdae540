"""Receipts, as the engine issues and spends them: what a protected system checks before it acts on a call hitl let
through. One package, its modules standing in the engine's layers (``tests/test_architecture.py``):

- ``claims``: the claims of a receipt and the records of its issue and use (pure)
- ``spec``: the ``receipts:`` section of ``hitl.yaml``
- ``ports``: the ledger a store keeps, the key that signs, the claim path, the way to ``hitl serve``
- ``issuing``: ``hitl serve`` signs, in the execution claim's own atomic step
- ``unavailable``: a process that cannot get receipts refuses what they would cover
- ``custody``: whether a process other than ``hitl serve`` could read a signing key
- ``claiming``: how this process claims an approved execution with its receipt
- ``withdrawing``: a decider or an admin withdraws an approval whose receipts are unspent
- ``evidence``: the durable, signed record of an executed approval (pure: its claims)

The HTTP client that asks ``hitl serve`` (``hitl.receipts.remote``), the signing keys ``hitl serve`` loads
(``hitl.receipts.signing``) and what a protected system verifies with (``hitl.receipts``) are outside the engine.
"""
