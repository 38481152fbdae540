"""A command a reviewer runs one of two ways, written once: through ``hitl serve``'s API with a token (``HITL_API_URL``
and ``HITL_TOKEN``: the token says who acts, and the server checks it may), or against the store as the reviewer
``--as`` (``HITL_REVIEWER``) claims, which ``production: true`` refuses (audited). Either way the command prints the
same answer, and its errors are one line with their exit code.

A command declares only its own options and returns its :class:`Ways`; :func:`as_reviewer` adds the options every
such command shares (``--as``, ``--json``, ``--store``, ``--config``) and runs the way that applies::

    @trust_app.command("list", cls=FlagCommand)
    @as_reviewer("trust list", read_only=True)
    def trust_list() -> Ways[Any]:
        \"\"\"List the grants in force of the tools you may decide.\"\"\"
        return Ways(ApiCall("GET", "/trust", read=...), local=..., show=...)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from hitl.cli.options import AsOpt, ConfigOpt, JsonOpt, StoreOpt

if TYPE_CHECKING:  # what a command uses when it runs, not when `hitl --help` lists it
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.runtime.process import Runtime

__all__ = ["ApiCall", "Guard", "Ways", "as_reviewer"]

T = TypeVar("T")

Guard = Callable[["Runtime", str, str], Awaitable[None]]
"""What may refuse the reviewer against the store before the command acts: ``(runtime, reviewer, what)``."""


@dataclass(frozen=True)
class ApiCall(Generic[T]):
    """The remote way: one call of ``hitl serve``'s API (``/api/v1`` + ``path``), and what the command reads from its
    answer (a refusal is an error of the command, with the API's code)."""

    method: str
    path: str
    read: Callable[[Any], T]
    """The answer's JSON body -> what the command shows (validated by the API's model)."""
    json: Any = None
    query: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Ways(Generic[T]):
    """The two ways one reviewer's command runs, and how it prints what either gave."""

    remote: ApiCall[T]
    """Through the API, as the token's reviewer."""
    local: Callable[[Runtime, str], Awaitable[T]]
    """Against the store: ``(runtime, reviewer)``, after the guard let the reviewer act."""
    show: Callable[[Out, T], None]
    """Prints the answer: text, or one JSON object with ``--json``."""
    check: Callable[[], object] | None = None
    """Against the store: the command's own input checks, run before the store is opened (a refused input creates
    nothing)."""


_SHARED = (
    inspect.Parameter("reviewer", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=AsOpt),
    inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOpt),
    inspect.Parameter("store", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=StoreOpt),
    inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt),
)
"""The options every reviewer's command takes, after its own (the order ``--help`` lists them in)."""


def as_reviewer(
    what: str, *, read_only: bool = False, guard: Guard | None = None
) -> Callable[[Callable[..., Ways[Any]]], Callable[..., None]]:
    """Make ``hitl WHAT`` a reviewer's command: the decorated function takes the command's own options and returns
    its :class:`Ways`; the command also takes ``--as``, ``--json``, ``--store`` and ``--config``, runs the remote way
    when ``HITL_API_URL`` and ``HITL_TOKEN`` are set, else the local one (``--as`` is required there), prints the
    answer and exits.

    Args:
        what: The command as its refusals name it (``hitl WHAT ... is refused``).
        read_only: The command only reads, and never creates a store.
        guard: What may refuse the reviewer against the store (default: ``production: true`` refuses a claimed
            identity, audited).
    """

    def decorate(declare: Callable[..., Ways[Any]]) -> Callable[..., None]:
        own = inspect.signature(declare, eval_str=True)

        @functools.wraps(declare)
        def command(
            *args: Any, reviewer: str | None, as_json: bool, store: str | None, config: str | None, **kw: Any
        ) -> None:
            ways = declare(*args, **kw)  # the command's own options first: a bad one is a usage error, as before
            from hitl.cli.context import CliSettings
            from hitl.cli.output import Out

            out = Out(as_json=as_json)
            _run(what, out, CliSettings.resolve(store=store, config=config, reviewer=reviewer), ways, read_only, guard)

        # Typer reads the options from the signature (the command's own, then the shared ones) and its annotations,
        # both as objects: the declaring module's names are not the wrapper's.
        parameters = [*own.parameters.values(), *_SHARED]
        command.__signature__ = own.replace(parameters=parameters, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {**{p.name: p.annotation for p in parameters}, "return": None}
        return command

    return decorate


def _run(what: str, out: Out, settings: CliSettings, ways: Ways[T], read_only: bool, guard: Guard | None) -> None:
    from hitl.cli.command import run_command
    from hitl.cli.flows import refuse_claimed_in_production
    from hitl.cli.remote import connect

    async def work() -> int:
        client = await connect(settings.reviewer)
        if client is not None:
            call = ways.remote
            result = call.read(await client.call(call.method, call.path, json=call.json, query=call.query))
        else:
            who = settings.require_reviewer()
            if ways.check is not None:
                ways.check()
            from hitl.engine.runtime.process import open_runtime  # here: the remote way loads no runtime

            # A reading command's worker is named as any reader's; one that writes, as the CLI's.
            async with open_runtime(settings.runtime, kind="hitl" if read_only else "cli", read_only=read_only) as rt:
                await (guard or refuse_claimed_in_production)(rt, who, what)
                result = await ways.local(rt, who)
        ways.show(out, result)
        return 0

    run_command(out, work)
