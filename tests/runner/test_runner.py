"""The runner through its API on real stores: gates, feedback, batches, quality loops, crash recovery."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.ports import Store
from hitl.engine.runner.executor import Runner
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url

FLOWS = Path(__file__).parent / "flows"


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("HITL_TEST_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location("flow_tools_view", FLOWS / "tools.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    yield mod


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store(fresh_store_url(request.param, request, tmp_path, tag="run"))
    yield s
    await s.close()


@pytest.fixture
def svc(store: Store, clock: FakeClock) -> ApprovalService:
    return ApprovalService.from_config(load_config(FLOWS / "hitl.yaml"), store=store, clock=clock)


async def test_gate_feedback_reruns_previous_step_then_publishes_once(
    svc: ApprovalService, effects: ModuleType
) -> None:
    wf = load_workflow(FLOWS / "gate.yaml")
    runner = Runner(svc)
    r = await runner.start(wf, {})
    assert r.status is RunStatus.PAUSED and r.approval is not None and r.approval.tool == "gate:review"
    assert r.approval.required_role == "editors" and "A note about hitl." in r.approval.preview
    await svc.decide(DecideRequest(r.approval.id, "U_ED1", DecisionKind.FEEDBACK, reason="mention the audit log"))
    r2 = await runner.resume(r.session_id)
    assert r2.status is RunStatus.PAUSED and r2.approval is not None and r2.approval.id != r.approval.id
    assert "revised: mention the audit log" in r2.approval.preview
    assert [c["feedback"] for c in effects.read("calls") if c["tool"] == "draft"] == ["", "mention the audit log"]
    await svc.decide(DecideRequest(r2.approval.id, "U_ED2", DecisionKind.APPROVE))
    r3 = await runner.resume(r.session_id)
    assert r3.status is RunStatus.PAUSED and r3.approval is not None and r3.approval.tool == "publish"
    await svc.decide(DecideRequest(r3.approval.id, "U_ED1", DecisionKind.APPROVE))
    done = await runner.resume(r.session_id)
    assert done.status is RunStatus.COMPLETED
    assert len(effects.read("published")) == 1
    again = await runner.resume(r.session_id)
    assert again.status is RunStatus.COMPLETED and len(effects.read("calls")) == 3


async def test_gate_expiry_with_continue_fallback(svc: ApprovalService, clock: FakeClock, effects: ModuleType) -> None:
    runner = Runner(svc)
    r = await runner.start(load_workflow(FLOWS / "gate.yaml"), {})
    clock.advance(601)
    [expired] = await svc.expire_due()
    assert expired.status is Status.EXPIRED and expired.decisions == ()
    r2 = await runner.resume(r.session_id)
    assert r2.status is RunStatus.PAUSED and r2.approval is not None and r2.approval.tool == "publish"
    assert any("fallback continue" in h for h in r2.history)


async def test_batch_one_approval_items_once_failed_item_retried_alone(
    svc: ApprovalService, effects: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf = load_workflow(FLOWS / "batch.yaml")
    runner = Runner(svc)
    r = await runner.start(wf, {})
    assert r.status is RunStatus.PAUSED and r.approval is not None
    assert r.approval.args == {"items": [{"to": "a@x.io"}, {"to": "b@x.io"}, {"to": "c@x.io"}]}
    assert r.approval.metadata["batch"] == 3 and not r.approval.trustable
    # An item added after approval cannot ride along: a new list needs a new approval.
    grown = await Runner(svc).start(wf, {"people": "a@x.io,b@x.io,c@x.io,evil@x.io"}, session_id=r.session_id + "b")
    assert grown.approval is not None and grown.approval.action_hash != r.approval.action_hash
    await svc.decide(DecideRequest(r.approval.id, "U_OPS1", DecisionKind.APPROVE))
    monkeypatch.setenv("HITL_TEST_FAIL_TO", "b@x.io")
    failed = await runner.resume(r.session_id)
    assert failed.status is RunStatus.FAILED and "mail server refused b@x.io" in (failed.reason or "")
    assert [e["to"] for e in effects.read("sent")] == ["a@x.io"]
    monkeypatch.delenv("HITL_TEST_FAIL_TO")
    # The batch's approval is recorded as executed only once every item's outcome is: never ahead of them.
    mark = runner.context.effects.mark
    seen_at_executed: list[list[str]] = []

    async def watched(approval: Approval, target: Status) -> Approval:
        if target is Status.EXECUTED:
            claims = [await svc.store.ledger.get(f"{r.session_id}:send_all:0:{i}") for i in range(3)]
            seen_at_executed.append([str(c.state) if c else "none" for c in claims])
        return await mark(approval, target)

    monkeypatch.setattr(runner.context.effects, "mark", watched)
    done = await runner.resume(r.session_id)
    assert done.status is RunStatus.COMPLETED
    assert seen_at_executed == [["succeeded", "succeeded", "succeeded"]]
    assert [e["to"] for e in effects.read("sent")] == ["a@x.io", "b@x.io", "c@x.io"]
    assert [c["to"] for c in effects.read("calls")] == ["a@x.io", "b@x.io", "b@x.io", "c@x.io"]
    assert (await svc.store.approvals.get(r.approval.id)).status is Status.EXECUTED


async def test_quality_loop_reviews_after_n_iterations(svc: ApprovalService, effects: ModuleType) -> None:
    runner = Runner(svc)
    r = await runner.start(load_workflow(FLOWS / "loop.yaml"), {})
    assert r.status is RunStatus.PAUSED and r.approval is not None and r.approval.tool == "review:polish"
    assert [c["round"] for c in effects.read("calls")] == [0, 1]
    await svc.decide(DecideRequest(r.approval.id, "U_ED1", DecisionKind.FEEDBACK, reason="tighten it"))
    done = await runner.resume(r.session_id)
    assert done.status is RunStatus.COMPLETED and done.outputs["polish"]["score"] == 100
    assert effects.read("calls")[-1] == {"tool": "improve", "round": 3, "feedback": "tighten it"}


async def test_crash_mid_effect_recovers_exactly_once(
    svc: ApprovalService, clock: FakeClock, effects: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf = load_workflow(FLOWS / "gate.yaml")
    first = Runner(svc, worker_id="worker-1", lease=60)
    r = await first.start(wf, {})
    assert r.approval is not None
    await svc.decide(DecideRequest(r.approval.id, "U_ED1", DecisionKind.APPROVE))
    r = await first.resume(r.session_id)
    assert r.approval is not None
    await svc.decide(DecideRequest(r.approval.id, "U_ED2", DecisionKind.APPROVE))
    monkeypatch.setenv("HITL_TEST_CRASH", "publish")
    with pytest.raises(KeyboardInterrupt):
        await first.resume(r.session_id)  # the process "dies" after the effect, before recording it
    second = Runner(svc, worker_id="worker-2", lease=60)
    with pytest.raises(EngineError) as busy:
        await second.resume(r.session_id)
    assert busy.value.code is ErrorCode.CLAIM_IN_PROGRESS
    clock.advance(61)
    done = await second.resume(r.session_id)
    assert done.status is RunStatus.COMPLETED
    assert len(effects.read("published")) == 1  # the tool saw the same idempotency key and deduplicated
    assert [c["tool"] for c in effects.read("calls")].count("publish") == 2
    assert (await svc.store.approvals.get(r.approval.id)).status is Status.EXECUTED


async def test_templates_are_checked_before_anything_runs(
    svc: ApprovalService, tmp_path: Path, effects: ModuleType
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((FLOWS / "gate.yaml").read_text().replace('steps.draft.output.text }}"}', 'steps.publish.x }}"}'))
    (tmp_path / "tools.py").write_text((FLOWS / "tools.py").read_text())
    with pytest.raises(EngineError, match="steps.publish, which is not an earlier step"):
        await Runner(svc).start(load_workflow(bad), {})
    assert effects.read("calls") == []
    assert os.environ["HITL_TEST_DIR"] == str(tmp_path)


async def test_resume_reads_the_waiting_approval_from_the_checkpoint(
    svc: ApprovalService, effects: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed step does not propose again: no second policy evaluation, no rolling-window count, and a
    decision stands even if the policy changed meanwhile (the run resumes on the approval it waited for)."""
    wf = load_workflow(FLOWS / "gate.yaml")
    runner = Runner(svc)
    r = await runner.start(wf, {})
    assert r.approval is not None and r.approval.tool == "gate:review"
    await svc.decide(DecideRequest(r.approval.id, "U_ED1", DecisionKind.APPROVE))
    proposed: list[str] = []
    real = svc.propose

    async def spy(request: ProposeRequest) -> object:
        proposed.append(request.tool)
        return await real(request)

    monkeypatch.setattr(svc, "propose", spy)
    done = await runner.resume(r.session_id)
    assert done.status is RunStatus.PAUSED and done.approval is not None and done.approval.tool == "publish"
    assert proposed == ["publish"]  # the gate was read from the checkpoint; only the next step proposed


def _variant(tmp_path: Path, publish: str) -> Path:
    """gate.yaml with another declaration of the publish tool, beside a copy of the tools and hitl.yaml."""
    for name in ("tools.py", "hitl.yaml"):
        (tmp_path / name).write_text((FLOWS / name).read_text())
    path = tmp_path / "variant.yaml"
    text = (FLOWS / "gate.yaml").read_text()
    declared = '{function: "tools:publish", idempotent: true'
    assert declared in text  # the variant must really change the declaration
    path.write_text(text.replace(declared, publish))
    return path


async def _crash_in_publish(svc: ApprovalService, wf_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run to the publish effect and "die" inside it, after the side effect and before its outcome is recorded."""
    first = Runner(svc, worker_id="worker-1", lease=60)
    r = await first.start(load_workflow(wf_path), {})
    assert r.approval is not None
    await svc.decide(DecideRequest(r.approval.id, "U_ED1", DecisionKind.APPROVE))
    r = await first.resume(r.session_id)
    assert r.approval is not None and r.approval.tool == "publish"
    await svc.decide(DecideRequest(r.approval.id, "U_ED2", DecisionKind.APPROVE))
    monkeypatch.setenv("HITL_TEST_CRASH", "publish")
    with pytest.raises(KeyboardInterrupt):
        await first.resume(r.session_id)
    return r.session_id


@pytest.mark.parametrize("answer", ["mark_done", "run_again", "stop"])
async def test_an_effect_in_doubt_goes_to_a_person_and_never_repeats_blindly(
    svc: ApprovalService,
    clock: FakeClock,
    effects: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    answer: str,
) -> None:
    wf_path = _variant(tmp_path, '{function: "tools:publish"')  # no idempotency promise, no reconcile hook
    session = await _crash_in_publish(svc, wf_path, monkeypatch)
    clock.advance(61)
    second = Runner(svc, worker_id="worker-2", lease=60)
    paused = await second.resume(session)
    doubt = paused.approval
    assert paused.status is RunStatus.PAUSED and doubt is not None and doubt.tool == "doubt:publish"
    assert doubt.required_role == "editors" and doubt.args["tool"] == "publish"
    assert "stopped before recording whether it happened" in doubt.preview
    assert [c["tool"] for c in effects.read("calls")].count("publish") == 1  # nothing ran again on its own
    again = await second.resume(session)  # asking again is the same question, not a second one
    assert again.approval is not None and again.approval.id == doubt.id
    if answer == "mark_done":
        await svc.decide(DecideRequest(doubt.id, "U_ED1", DecisionKind.FEEDBACK, reason="post P-1 is live"))
    elif answer == "run_again":
        await svc.decide(DecideRequest(doubt.id, "U_ED1", DecisionKind.APPROVE))
    else:
        await svc.decide(DecideRequest(doubt.id, "U_ED1", DecisionKind.REJECT, reason="check with legal first"))
    done = await second.resume(session)
    calls = [c["tool"] for c in effects.read("calls")].count("publish")
    audit = [e.event for e in await svc.store.audit.entries(limit=500)]
    assert "in_doubt" in audit
    if answer == "stop":
        assert done.status is RunStatus.REJECTED and calls == 1
    else:
        assert done.status is RunStatus.COMPLETED and calls == (1 if answer == "mark_done" else 2)
        assert done.outputs["publish"] == (
            {"recorded_as_done": True, "tool": "publish"} if answer == "mark_done" else {"published": True}
        )


async def test_a_reconcile_hook_settles_a_doubt_without_a_person(
    svc: ApprovalService, clock: FakeClock, effects: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wf_path = _variant(tmp_path, '{function: "tools:publish", reconcile: "tools:was_published"')
    session = await _crash_in_publish(svc, wf_path, monkeypatch)
    clock.advance(61)
    done = await Runner(svc, worker_id="worker-2", lease=60).resume(session)
    assert done.status is RunStatus.COMPLETED and done.outputs["publish"]["reconciled"] is True
    assert [c["tool"] for c in effects.read("calls")].count("publish") == 1 and len(effects.read("published")) == 1
    assert "reconciled" in [e.event for e in await svc.store.audit.entries(limit=500)]


async def test_gate_previews_are_redacted_before_they_are_stored(svc: ApprovalService, effects: ModuleType) -> None:
    r = await Runner(svc).start(load_workflow(FLOWS / "gate.yaml"), {"topic": "jane@example.com, +1 415 555 0100"})
    assert r.approval is not None and r.approval.tool == "gate:review"
    stored = await svc.store.approvals.get(r.approval.id)
    shown = f"{stored.args} {stored.preview}"
    assert "jane@example.com" not in shown and "555 0100" not in shown and "[email]" in stored.args["preview"]


async def test_feedback_on_a_tool_approval_is_refused_not_turned_into_a_rejection(svc: ApprovalService) -> None:
    p = await svc.propose(ProposeRequest("publish", {"text": "hi"}, session_id="ses_fb"))
    assert p.approval is not None
    with pytest.raises(EngineError) as err:
        await svc.decide(DecideRequest(p.approval.id, "U_ED1", DecisionKind.FEEDBACK, reason="shorter please"))
    assert err.value.code is ErrorCode.INVALID_INPUT and "reject it with a reason" in err.value.message
    assert (await svc.store.approvals.get(p.approval.id)).status is Status.PENDING


async def test_run_level_events_join_the_audit_chain(svc: ApprovalService, effects: ModuleType) -> None:
    runner = Runner(svc)
    r = await runner.start(load_workflow(FLOWS / "gate.yaml"), {})
    assert r.approval is not None
    await svc.decide(DecideRequest(r.approval.id, "U_ED1", DecisionKind.APPROVE))
    r = await runner.resume(r.session_id)
    assert r.approval is not None
    await svc.decide(DecideRequest(r.approval.id, "U_ED2", DecisionKind.APPROVE))
    await runner.resume(r.session_id)
    runs = [(e.event, e.detail.split(":")[0]) for e in await svc.store.audit.entries() if e.event.startswith("run_")]
    assert [event for event, _ in runs] == [
        "run_started",
        "run_paused",
        "run_resumed",
        "run_paused",
        "run_resumed",
        "run_completed",
    ]
    assert {session for _, session in runs} == {r.session_id}
    checked, broken = await svc.store.audit.verify()
    assert broken is None and checked > len(runs)
