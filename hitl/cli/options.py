"""Options several commands share, each read from its environment variable too (help shows ``[env var: ...]``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

__all__ = ["NO_CONFIG", "AsOpt", "ConfigOpt", "JsonOpt", "Order", "StoreOpt"]

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", envvar="HITL_STORE", help="Store URL: sqlite:///path.db (default .hitl/hitl.db) or redis://."
    ),
]
ConfigOpt = Annotated[
    str | None,
    typer.Option("--config", envvar="HITL_CONFIG", help="hitl.yaml (default: beside the workflow, then ./hitl.yaml)."),
]
AsOpt = Annotated[
    str | None, typer.Option("--as", envvar="HITL_REVIEWER", help="Who is deciding: a reviewer id from roles.")
]
NO_CONFIG = (
    "no hitl.yaml found (pass --config, set HITL_CONFIG, or add ./hitl.yaml): the built-in defaults apply, where "
    "every tool needs approval and no reviewer has a role"
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


class Order(StrEnum):
    """The order ``hitl pending`` lists in."""

    RANK = "rank"
    """The most important first: tier, then how far over its threshold, then time left."""
    AGE = "age"
    """Oldest first."""
