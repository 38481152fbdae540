"""Test helpers and the conformance suites, published as :mod:`hitl.testing` (import them from there)."""
