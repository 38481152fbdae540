"""A real model provider: Strands' OpenAI model over real HTTP to an OpenAI-compatible server on 127.0.0.1. The key
comes from the environment; a resume replays the recorded turn instead of asking the model again."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.runtime.process import Runtime
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.ports import free_port
from tests.workflows.conftest import RESEARCH, Desk


class FakeOpenAI:
    """Chat completions, streamed as OpenAI streams them: a tool call first, then the answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.keys: list[str] = []

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.keys.append(request.headers.get("Authorization", ""))
        answered = any(m.get("role") == "tool" for m in body["messages"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        if answered:
            for part in ("The report ", "is ", "published."):
                await send({"content": part})
            await send({}, "stop")
        else:
            await send({"role": "assistant", "content": "Publishing now."})
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "publish_report", "arguments": ""},
            }
            await send({"tool_calls": [call]})
            for part in ('{"title": "Solid-state", ', '"body": "Safer, dearer."}'):
                await send({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            await send({}, "tool_calls")
        usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
        end = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body["model"],
            "choices": [],
            "usage": usage,
        }
        await response.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        return response


@pytest.fixture
async def openai_url() -> AsyncIterator[tuple[str, FakeOpenAI]]:
    fake = FakeOpenAI()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.completions)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/v1", fake
    finally:
        await runner.cleanup()


async def test_an_openai_agent_pauses_on_its_tool_and_resumes_without_asking_again(
    tmp_path: Path, desk: Desk, openai_url: tuple[str, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, fake = openai_url
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("HITL_EFFECTS", str(desk.path))
    shutil.copy(RESEARCH / "desk.py", tmp_path / "desk.py")
    shutil.copy(RESEARCH / "hitl.yaml", tmp_path / "hitl.yaml")
    flow = {
        "name": "openai-writer",
        "runtime": {"provider": "openai", "model_id": "gpt-test", "params": {"client_args": {"base_url": url}}},
        "tools": {"publish_report": {"function": "desk:publish_report"}},
        "agents": {"writer": {"prompt": "You publish reports.", "tools": ["publish_report"]}},
        "steps": [{"id": "report", "agent": "writer", "input": "Publish a report on solid-state batteries"}],
    }
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump(flow))
    store, config = f"sqlite:///{tmp_path}/o.db", str(tmp_path / "hitl.yaml")

    rt = Runtime.build(store=open_store(store), clock=FakeClock(), config_path=config)
    try:
        paused = await rt.lifecycle.start(load_workflow(path), {})
    finally:
        await rt.close()
    assert paused.status is RunStatus.PAUSED and paused.approval is not None
    assert paused.approval.args == {"title": "Solid-state", "body": "Safer, dearer."}  # streamed in pieces
    assert paused.approval.evidence == "writer: Publishing now."
    assert len(fake.requests) == 1 and fake.requests[0]["model"] == "gpt-test"
    assert fake.keys == ["Bearer sk-from-the-environment"]

    rt = Runtime.build(store=open_store(store), clock=FakeClock(), config_path=config)  # another process
    try:
        await rt.lifecycle.decide(DecideRequest(paused.approval.id, "U_EDITOR1", DecisionKind.APPROVE), resume="none")
        done = await rt.lifecycle.resume(paused.session_id)
    finally:
        await rt.close()
    assert done.status is RunStatus.COMPLETED and done.outputs["report"] == "The report is published."
    assert len(fake.requests) == 2  # the first turn was replayed from the checkpoint, not asked again
    assert [m["role"] for m in fake.requests[1]["messages"]][-2:] == ["assistant", "tool"]
    assert desk.tools() == ["publish_report"]
