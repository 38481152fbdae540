"""``hitl answer APPROVAL TEXT``: answer a question an agent asked a person (``ask_person``, from ``mcp.ask_person``
in ``hitl.yaml``). It is ``hitl resume APPROVAL --modify --set answer=TEXT`` said plainly: the edit that adds the
answer, through the API with a token (``HITL_API_URL`` and ``HITL_TOKEN``) or against the store as ``--as``; the
engine refuses it past ``max_chars``, and on a tool that takes no ``answer`` argument."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt
from hitl.cli.resume import resume  # the one decide path of the CLI

__all__ = ["answer"]


def answer(
    approval: Annotated[str, typer.Argument(help="The question's approval id.", show_default=False)],
    text: Annotated[str, typer.Argument(help="Your answer, as the asker will read it.", show_default=False)],
    as_json: JsonOpt = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
    reviewer: AsOpt = None,
) -> None:
    """Answer a question an agent asked (ask_person): recorded once, audited, returned to the agent."""
    resume(
        [approval],
        approve=False,
        reject=False,
        modify=True,
        trust=False,
        feedback=None,
        reason=None,
        confirm=None,
        args=json.dumps({"answer": text}),
        set_=None,
        replace=False,
        force=False,
        var=None,
        as_json=as_json,
        store=store,
        config=config,
        reviewer=reviewer,
    )
