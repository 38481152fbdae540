"""The ``hitl`` commands that serve and set up: ``serve`` (the Slack app, the API, the background work), ``mcp``
(the approval gateway), ``init`` (a starter or a bundled example) and ``demo`` (the sandbox tour)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hitl.cli.options import ConfigOpt, StoreOpt

if TYPE_CHECKING:
    from hitl.cli.output import Out

__all__ = ["demo", "init", "mcp", "serve"]


def _require_serve_extra(out: Out, command: str) -> None:
    """``hitl serve`` and ``hitl demo`` run the Slack app and an HTTP server: the ``serve`` extra. Say so plainly."""

    import importlib.util

    missing = [m for m in ("slack_bolt", "aiohttp", "prometheus_client") if importlib.util.find_spec(m) is None]
    if missing:
        out.error(
            "missing_extra",
            f"`hitl {command}` needs the serve extra ({', '.join(missing)} not installed): "
            "pip install 'hitl-gate[serve]'",
        )
        raise typer.Exit(1)


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind (use 0.0.0.0 in a container).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port for HTTP.")] = 3000,
    socket: Annotated[bool, typer.Option("--socket", help="Socket Mode (SLACK_APP_TOKEN) instead of HTTP.")] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            envvar="HITL_WORKERS",
            help="HTTP server processes sharing the port (SO_REUSEPORT) and the store; about one per core.",
        ),
    ] = 1,
    reuse_port: Annotated[bool, typer.Option("--reuse-port", hidden=True)] = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Serve the Slack app: POST /slack/events, GET /healthz, GET /metrics (or Socket Mode).

    SIGHUP reads hitl.yaml again: its roles apply to the next decision (policy changes need a restart)."""
    from hitl.cli.command import run_service
    from hitl.cli.output import Out

    out = Out(as_json=False)
    _require_serve_extra(out, "serve")
    if workers > 1:
        if socket:
            out.error("invalid_input", "--workers is for HTTP; Socket Mode runs in one process")
            raise typer.Exit(2)
        from hitl.cli.loading import loaded
        from hitl.cli.workers import supervise

        loaded()  # the supervisor's work begins (hitl/cli/loading.py)
        raise typer.Exit(supervise(workers, host=host, port=port, store=store, config=config))

    from hitl.bot.errors import BotError
    from hitl.bot.server import serve_http, serve_socket
    from hitl.bot.settings import BotSettings
    from hitl.logs import configure_logging
    from hitl.serve import build_server, new_replica_id

    replica = new_replica_id()
    configure_logging(logging.INFO, replica=replica)
    overrides: dict[str, Any] = {}
    if store:
        overrides["hitl_store"] = store
    if config:
        overrides["hitl_config"] = config
    settings = BotSettings(**overrides)

    async def work() -> int:
        server = await build_server(settings, socket_mode=socket, replica=replica, one_of_workers=reuse_port)
        if server.reload is not None:  # SIGHUP: hitl.yaml's roles (and web sign-in mappings) read again
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, server.reload.soon)
        gc.collect()
        gc.freeze()  # what startup built lives as long as the process: out of the collector's sight on every click
        try:
            server.background.start()
            if socket:
                assert settings.slack_app_token is not None
                await serve_socket(server.bot, settings.slack_app_token.get_secret_value())
            else:
                await serve_http(
                    server.bot,
                    host=host,
                    port=port,
                    app=server.web_app(),
                    reuse_port=reuse_port,
                    access_log=settings.hitl_access_log,
                )
        finally:
            await server.close()
        return 0

    try:
        run_service(out, work)
    except BotError as exc:
        out.error(str(exc.code), exc.message)
        raise typer.Exit(1) from None


def mcp(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP at /mcp instead of stdio.")] = False,
    host: Annotated[str, typer.Option("--host", help="Address for --http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port for --http.")] = 8765,
    session: Annotated[
        str | None, typer.Option("--session", help="Session for approvals and trust (default: mcp.session).")
    ] = None,
    person_tools: Annotated[
        bool, typer.Option("--person-tools", help="Also serve request_approval (an agent asks a person itself).")
    ] = False,
    store: StoreOpt = None,
    config: ConfigOpt = None,
) -> None:
    """The MCP approval gateway: the tools of hitl.yaml's mcp.servers, every call decided by the policy.

    Approvals appear in Slack through `hitl serve` on the same store."""
    from hitl.api.tokens import TokenBook
    from hitl.cli.command import run_command
    from hitl.cli.context import CliSettings
    from hitl.cli.output import Out
    from hitl.engine.agents.gate import ToolGate
    from hitl.engine.config.api import Scope
    from hitl.engine.errors import InvalidInput
    from hitl.engine.process.workers import worker_name
    from hitl.engine.runtime.process import open_runtime
    from hitl.logs import configure_logging
    from hitl.mcp import Gateway, Upstreams, serve_http, serve_stdio
    from hitl.mcp.request_state import request_states

    # stdout carries the protocol over stdio: every log line goes to stderr.
    configure_logging(logging.WARNING, replica="mcp")
    out = Out(as_json=False)
    settings = CliSettings.resolve(store=store, config=config, reviewer=None)

    async def work() -> int:
        # The MCP SDK (through anyio) asks sniffio which event loop runs several times per message; under
        # asyncio.run nothing has said, so each ask probes asyncio. Said once here, as anyio.run says it.
        with contextlib.suppress(ImportError):
            import sniffio

            sniffio.current_async_library_cvar.set("asyncio")
        async with open_runtime(settings.runtime, kind="mcp") as rt:
            context = rt.contexts.default
            spec = context.config.mcp
            if not spec.servers and not person_tools:
                raise InvalidInput(
                    "hitl.yaml lists no MCP servers under mcp.servers; add one to front it (or serve hitl's own "
                    "request_approval alone: hitl mcp --person-tools)"
                )
            gate = ToolGate(context.service, worker_id=worker_name("mcp"))
            tokens = None
            if http:  # every client says who it is: its own token, its own identity
                proposers = [
                    t for t in context.config.api.tokens if Scope.PROPOSE in t.scopes or Scope.ADMIN in t.scopes
                ]
                if not proposers:
                    raise InvalidInput(
                        "hitl mcp --http authenticates each client: add a token with the propose scope under "
                        "api.tokens in hitl.yaml (`hitl token new --name agent --as agent:NAME --scope propose`)"
                    )
                tokens = TokenBook(proposers)
            gateway = Gateway(
                gate,
                Upstreams(dict(spec.servers)),
                session=session or spec.session,
                wait=spec.wait,
                tokens=tokens,
                states=request_states(context.config, context.service.clock),
                public_url=context.config.web.public_url if context.config.web is not None else None,
                person_tools=person_tools,
            )
            await gateway.start()
            # Everything built so far lives as long as the process: out of the collector's sight, so a collection
            # on the call path does not walk the imported modules and the gateway over and over.
            gc.collect()
            gc.freeze()
            try:
                if http:
                    await serve_http(gateway, host=host, port=port)
                else:
                    await serve_stdio(gateway)
            finally:
                await gateway.close()
        return 0

    run_command(out, work)  # over HTTP, uvicorn installs its own SIGINT/SIGTERM handlers and drains first


def init(
    directory: Annotated[str, typer.Argument(help="Where to write the files.")] = ".",
    example: Annotated[
        str | None,
        typer.Option("--example", help="Write a bundled example instead of the starter: refund.", metavar="NAME"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files that exist.")] = False,
) -> None:
    """Write a starter (a commented hitl.yaml, a workflow, its tools.py) or a bundled example, and say how to run it."""
    from pathlib import Path

    from hitl.cli.output import Out
    from hitl.cli.starter import FILES
    from hitl.demo.examples import refund_example

    out = Out(as_json=False)
    if example not in (None, "refund"):
        out.error("invalid_input", f"no bundled example named {example!r}; the one there is: refund")
        raise typer.Exit(2)
    files = (
        {
            n: (refund_example() / n).read_text()
            for n in ("hitl.yaml", "workflow.yaml", "tools.py", "shop_consequences.py")
        }
        if example == "refund"
        else FILES
    )
    target = Path(directory)
    existing = [name for name in files if (target / name).exists()]
    if existing and not force:
        out.error("exists", f"{', '.join(existing)} already in {target}; pass --force to overwrite")
        raise typer.Exit(1)
    target.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (target / name).write_text(text)
        out.text("wrote ", (str(target / name), "bold"))
    # Runnable from where `hitl init` was typed: the workflow by its path (its hitl.yaml and tools sit beside it).
    flow = "workflow.yaml" if target.resolve() == Path.cwd().resolve() else str(target / "workflow.yaml")
    if example == "refund":
        run, who = f"hitl run {flow} --var order_id=78291 --var amount=120", "U_SUPPORT1"
    else:
        run, who = f"hitl run {flow} --var to=acme --var amount=120", "U_YOU"
    # Each command on a line of its own, whole: copied from an 80-column terminal, nothing else comes with it.
    out.text("next:  ", (run, "bold"))
    out.text("       (it pauses for approval), then:")
    out.text("       ", (f"hitl resume <approval id> --approve --as {who}", "bold"))


def demo(
    scripted: Annotated[bool, typer.Option("--scripted", help="Run the scenario headless and exit.")] = False,
    cli: Annotated[bool, typer.Option("--cli", help="The CLI-only walkthrough (no Slack sandbox).")] = False,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port for the sandbox page.")] = 8700,
    api_port: Annotated[
        int | None,
        typer.Option(
            "--api-port", min=0, max=65535, help="Port for hitl serve's API (HITL_API_URL; default: --port + 1)."
        ),
    ] = None,
    store: Annotated[
        str | None, typer.Option("--store", help="Keep the sandbox's approvals in this store (default: a throwaway).")
    ] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="Show your own hitl.yaml (roles become the sandbox's people).")
    ] = None,
) -> None:
    """The refund example in a local Slack sandbox in your browser (no Slack account, no Redis, no network).

    It runs until you stop it (Ctrl-C), printing the page's address and hitl serve's API address (HITL_API_URL)."""
    from hitl.cli.command import run_service
    from hitl.cli.output import Out

    if cli:
        from hitl.demo.cli_tour import run_demo

        raise typer.Exit(run_demo(store))
    _require_serve_extra(Out(as_json=False), "demo")
    from hitl.demo.scenario import run_interactive, run_scripted

    if scripted:
        import asyncio

        from hitl.cli.loading import loaded

        loaded()  # the demo's work begins (hitl/cli/loading.py)
        raise typer.Exit(asyncio.run(run_scripted()))

    # The API beside the page (8701 beside 8700), so a page of the docs can name it; any free one beside 0.
    beside = _beside(port, api_port)

    async def interactive() -> int:
        await run_interactive(port=port, store_url=store, config=config, api_port=beside)
        return 0

    run_service(Out(as_json=False), interactive, address="--port/--api-port")  # the sandbox binds 127.0.0.1 only


def _beside(port: int, api_port: int | None) -> int:
    """The API's port: the one asked for, else the page's next (0, any free one, beside 0)."""
    if api_port is not None:
        return api_port
    if port == 0:
        return 0
    if port == 65535:
        raise typer.BadParameter("the API goes on --port + 1: pick a lower --port, or --api-port", param_hint="--port")
    return port + 1
