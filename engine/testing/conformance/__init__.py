"""The conformance suites, one module per store port and one for framework adapters. Published (and listed once)
as :mod:`hitl.testing.conformance`; these modules import pytest."""
