"""Trivial tools for the cycle benchmark: the cost measured is hitl's, not the tools'."""

from __future__ import annotations


async def prepare(value: int) -> dict[str, int]:
    return {"value": value + 1}


async def act(value: int) -> dict[str, int]:
    return {"value": value * 2}


async def finish(value: int) -> dict[str, int]:
    return {"value": value + 3}
