"""Composition: the one place that builds a run's context (configuration, policy, service, runner, validation).

Every surface builds through here: ``hitl run/resume/expire``, ``hitl serve`` (its listeners and the run
lifecycle), the sandbox, and the Python API. Nothing else constructs an :class:`ApprovalService` for a run, so
the same workflow and the same decision give the same next approval whichever surface the decision came from.

Which ``hitl.yaml`` a context uses (first match wins):

1. for an existing run, the one recorded when it started (a run keeps its policy for its whole life);
2. ``--config`` / ``HITL_CONFIG``;
3. the workflow's ``config:`` key, relative to the workflow file;
4. ``hitl.yaml`` beside the workflow file;
5. ``./hitl.yaml``; otherwise none (every tool needs approval).

How a workflow's own tool policies combine with ``hitl.yaml`` (:func:`effective_config`): ``hitl.yaml`` is the
operator's file and always wins; a workflow's ``tools.<name>.policy`` applies only to tools ``hitl.yaml`` does not
mention. Dynamic rules, roles, allow and deny lists come from ``hitl.yaml`` alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hitl.engine.config.hitl_yaml import HitlConfig, load_config
from hitl.engine.consequences.running import ConsequenceRunner
from hitl.engine.consequences.threads import ThreadConsequences
from hitl.engine.domain.runs import RunState
from hitl.engine.execution.tools import Tool, load_tools
from hitl.engine.policy_engines import OpaClient
from hitl.engine.ports import Clock, Notifier, Store, Workspace
from hitl.engine.receipts.ports import ReceiptSigner, ReceiptsRemote
from hitl.engine.service import ApprovalService

if TYPE_CHECKING:  # the runner and the workflow files are imported when a run needs them (see RunContext.runner)
    from hitl.engine.runner.executor import Runner
    from hitl.engine.workflow.definition import LoadedWorkflow, WorkflowFiles

__all__ = ["RunContext", "RunContexts", "compose", "config_path_for", "effective_config"]


def effective_config(config: HitlConfig, workflow: LoadedWorkflow | None) -> HitlConfig:
    """``config`` plus the workflow's tool policies for tools it does not mention (``hitl.yaml`` wins)."""
    if workflow is None:
        return config
    extra = {
        n: t.policy for n, t in workflow.spec.tools.items() if t.policy is not None and n not in config.policy.tools
    }
    if not extra:
        return config
    policy = config.policy.model_copy(update={"tools": {**config.policy.tools, **extra}})
    return config.model_copy(update={"policy": policy})


def config_path_for(
    explicit: str | None, workflow: LoadedWorkflow | None = None, recorded: str | None = None
) -> str | None:
    """The ``hitl.yaml`` to use, by the precedence in the module docstring; absolute, so a run can record it."""
    if recorded:
        return recorded
    if explicit:
        return str(Path(explicit).resolve())
    if workflow is not None:
        if workflow.spec.config:
            return str((workflow.path.parent / workflow.spec.config).resolve())
        beside = workflow.path.parent / "hitl.yaml"
        if beside.exists():
            return str(beside.resolve())
    return str(Path("hitl.yaml").resolve()) if Path("hitl.yaml").exists() else None


@dataclass
class RunContext:
    """Everything a run (or an ask-API caller) decides and executes with."""

    config: HitlConfig
    config_path: str | None
    service: ApprovalService
    tools: dict[str, Tool] = field(default_factory=dict)
    workflow: LoadedWorkflow | None = None
    worker_id: str | None = None
    """Names this process in the runner's claims and the audit log."""
    workflows: Callable[[], WorkflowFiles] | None = None
    """The workflow files the runtime read, asked for when the runner is built (None: the runner keeps its own)."""

    @cached_property
    def runner(self) -> Runner:
        """What starts and resumes runs in this context, built at first use: a listing, a halt or a decision on an
        approval of no run never needs it, and importing it (the step loop, the workflow models) cost every such
        command some 65 ms of CPU."""
        from hitl.engine.runner.executor import Runner

        files = self.workflows() if self.workflows is not None else None
        return Runner(self.service, worker_id=self.worker_id, workflows=files)


def compose(
    *,
    store: Store,
    clock: Clock,
    config_path: str | None,
    workflow: LoadedWorkflow | None = None,
    notifier: Notifier | None = None,
    worker_id: str | None = None,
    workflows: Callable[[], WorkflowFiles] | None = None,
    signer: ReceiptSigner | None = None,
    workspace: Workspace | None = None,
    remote: ReceiptsRemote | None = None,
    consequences: ConsequenceRunner | None = None,
    opa: OpaClient | None = None,
) -> RunContext:
    """Build the context for ``workflow`` (or for no workflow) with the ``hitl.yaml`` at ``config_path``.
    ``workflows``: the workflow files the runtime read (its runner, once built, reads a resumed run's file through
    them);
    ``workspace``: where a delegate ``hitl.yaml`` does not list is looked up (``hitl serve``'s Slack); ``remote``:
    how a process without the signing key reaches ``hitl serve`` for receipts (the composition root's client)."""
    config = effective_config(load_config(config_path), workflow)
    tools = load_tools(workflow.spec.tools, base=workflow.path.parent) if workflow is not None else {}

    def validate(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return tools[tool].schema.validate(args) if tool in tools else args

    service = ApprovalService.from_config(
        config,
        store=store,
        clock=clock,
        notifier=notifier,
        validate_args=validate,
        signer=signer,
        config_path=config_path,
        workspace=workspace,
        remote=remote,
        consequences=consequences,
        opa=opa,
    )
    return RunContext(
        config=config,
        config_path=config_path,
        service=service,
        tools=tools,
        workflow=workflow,
        worker_id=worker_id,
        workflows=workflows,
    )


class RunContexts:
    """The contexts one process needs, composed once each and cached.

    Args:
        store: the shared store.
        clock: the time source.
        config_path: ``--config`` / ``HITL_CONFIG`` (None: look beside the workflow, then ``./hitl.yaml``).
        notifier: tells reviewers (``hitl serve``'s Slack notifier); None elsewhere.
        worker_id: names this process in execution claims and the audit log.
        signer: signs receipts (``hitl serve``'s key); None in every other process.
        workspace: who is a person of the Slack workspace (``hitl serve``'s); None elsewhere.
        remote: how a process without the signing key reaches ``hitl serve`` for receipts; None: it cannot.
        opa: what asks OPA for ``opa:`` source rules (the composition root's HTTP client); None: they ask a person.
    """

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        config_path: str | None,
        notifier: Notifier | None = None,
        worker_id: str | None = None,
        signer: ReceiptSigner | None = None,
        workspace: Workspace | None = None,
        remote: ReceiptsRemote | None = None,
        consequences: ConsequenceRunner | None = None,
        opa: OpaClient | None = None,
    ) -> None:
        self.store = store
        self.opa = opa
        self.consequences: ConsequenceRunner = consequences or ThreadConsequences()
        """What runs tools' consequences, one for every context (its pools are per tool, not per context)."""
        self.remote = remote
        self.signer = signer
        self.workspace = workspace
        self.clock = clock
        self.config_path = config_path
        self.notifier = notifier
        self.worker_id = worker_id
        self._cache: dict[tuple[str | None, str | None, str | None], RunContext] = {}
        # Resolved once: the default context is on every decision's path (a fully bound approve uses it).
        self._default_path = config_path_for(config_path)

    @cached_property
    def workflows(self) -> WorkflowFiles:
        """The workflow files this runtime read (each read once while it does not change); made when a run, or a
        check of one, first reads a file (a listing never does, and never imports the workflow models)."""
        from hitl.engine.workflow.definition import WorkflowFiles

        return WorkflowFiles()

    @property
    def default(self) -> RunContext:
        """``hitl.yaml`` alone: the ask API, ``hitl pending``, approvals that belong to no run."""
        return self._context(self._default_path, None)

    def for_workflow(self, workflow: LoadedWorkflow, *, recorded_config: str | None = None) -> RunContext:
        """The context a run of ``workflow`` starts (or, with ``recorded_config``, continues) in."""
        return self._context(config_path_for(self.config_path, workflow, recorded_config), workflow)

    async def for_session(self, session_id: str) -> RunContext:
        """The context of the run ``session_id`` (its recorded config and its workflow), or the default context."""
        found = await self.store.runs.load(session_id)
        return self.for_state(RunState.of(found)) if found is not None else self.default

    def for_state(self, state: RunState) -> RunContext:
        """The context of a run whose checkpoint the caller read: its recorded config and its workflow file now."""
        return self.for_workflow(self.workflows.load(state.workflow_path), recorded_config=state.config_path)

    def composed(self) -> list[RunContext]:
        """The contexts composed so far (``hitl serve`` hands them the roles of a reloaded ``hitl.yaml``)."""
        return list(self._cache.values())

    def _context(self, config_path: str | None, workflow: LoadedWorkflow | None) -> RunContext:
        key = (config_path, str(workflow.path) if workflow else None, workflow.spec_hash if workflow else None)
        if key not in self._cache:
            self._cache[key] = compose(
                store=self.store,
                clock=self.clock,
                config_path=config_path,
                workflow=workflow,
                notifier=self.notifier,
                worker_id=self.worker_id,
                workflows=lambda: self.workflows,
                signer=self.signer,
                workspace=self.workspace,
                remote=self.remote,
                consequences=self.consequences,
                opa=self.opa,
            )
        return self._cache[key]
