"""Every Python block in the README and the documentation's pages is run by a test, as the text shows it (a coroutine
it defines is called, not only compiled), or is marked as a fragment of files the tests run
(``<!-- fragment of PATH[, PATH] -->`` on the line before it), or includes such a file whole (``--8<--``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hitl import (
    ApprovalService,
    DecideRequest,
    DecisionKind,
    SystemClock,
    open_store,
    parse_config,
)
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "pages").glob("*.md"))]

RUN_BY = {
    "async def refund(": "tests/test_docs_python.py::test_the_readmes_ask_runs_as_written",
    "async def handle(": "tests/test_docs_python.py::test_the_python_pages_ask_and_guard_run_as_written",
    "asyncio.run(main())": "tests/test_readme.py::test_readme_python_api_example_runs",
    "def verified(": "tests/test_readme.py::test_readme_webhook_verification_snippet_agrees_with_the_signer",
}
"""A runnable block, by what it alone contains, and the test that runs it."""

_BLOCK = re.compile(r"(?:<!-- fragment of (?P<of>[^>]+?) -->\n)?```python\n(?P<code>.*?)```", re.S)
_CALL = re.compile(r"(?<![\w.])(?:\w+\.)*(\w+)\(")

CONFIG = """
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  allowed_tools: [send_email]
  tools: {refund: {tier: approve, role: support}}
"""
BOTH_ASKED = """
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  tools:
    refund: {tier: approve, role: support}
    send_email: {tier: approve, role: support}
"""


def blocks() -> list[tuple[str, str | None, str]]:
    """Every Python block: (the page, the files it is marked a fragment of, its code)."""
    return [(p.name, m["of"], m["code"]) for p in PAGES for m in _BLOCK.finditer(p.read_text())]


def _block(marker: str) -> str:
    [code] = [code for _, _, code in blocks() if marker in code]
    return code


def _defined(code: str, name: str) -> Callable[..., Awaitable[Any]]:
    scope: dict[str, Any] = {}
    exec(compile(code, "docs", "exec"), scope)  # noqa: S102 - our own documentation, checked here
    found = scope[name]
    assert callable(found)
    return found  # type: ignore[no-any-return]


def test_every_python_block_runs_or_is_a_fragment_of_code_that_does() -> None:
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    for page, of, code in blocks():
        where = f"{page}: {code[:60]!r}"
        if code.lstrip().startswith("--8<--"):  # a file included whole: a test or an example the tests import
            path = re.findall(r'"([^"]+)"', code)[0]
            assert (ROOT / path).exists() and (path.startswith("tests/") or Path(path).stem in tests), where
            continue
        if of is not None:
            files = [ROOT / p.strip() for p in of.split(",")]
            assert all(f.exists() for f in files), where
            # Each file is a test, or one a test names, or one the others import (an example's shared setup).
            source = "\n".join(f.read_text() for f in files)
            run = [f.is_relative_to(ROOT / "tests") or f.stem in tests or f"import {f.stem}" in source for f in files]
            assert all(run), f"{where}: no test runs {[str(f) for f, r in zip(files, run, strict=True) if not r]}"
            # Every function it calls is one the files call or define: a fragment cannot drift from its source.
            bare = re.sub(r"#.*", "", code)  # what comments mention is not called
            called = {name for name in _CALL.findall(bare) if not re.search(rf"(def|class) {name}\(", bare)}
            missing = sorted(name for name in called if not re.search(rf"\b{name}\b", source))
            assert not missing, f"{where}: calls {missing}, which {of} never does"
            continue
        runners = [test for marker, test in RUN_BY.items() if marker in code]
        assert len(runners) == 1, f"{where}: run it in a test (RUN_BY) or mark it as a fragment"
        path, name = runners[0].split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), runners[0]


async def _pending(svc: ApprovalService) -> Any:
    async def first() -> Any:
        return next(iter((await svc.store.approvals.list_pending(limit=5)).items), None)

    return await eventually(first, what="the block's approval")


async def test_the_readmes_ask_runs_as_written(tmp_path: Path) -> None:
    refund = _defined(_block("async def refund("), "refund")
    svc = ApprovalService.from_config(
        parse_config(CONFIG), store=open_store(f"sqlite:///{tmp_path / 'h.db'}"), clock=SystemClock()
    )
    try:
        asked = asyncio.ensure_future(refund(svc, "conversation-7", "78291", 49))
        a = await _pending(svc)
        assert a.session_id == "conversation-7" and a.args == {"order_id": "78291", "amount": 49}
        await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": 40}))
        assert await asked == "refunding 40"  # the reviewer's edit is what runs

        asked = asyncio.ensure_future(refund(svc, "conversation-8", "78292", 900))
        a = await _pending(svc)
        await svc.decide(DecideRequest(a.id, "U_SUPPORT2", DecisionKind.REJECT, reason="order not found"))
        assert await asked == "not refunded: order not found"
    finally:
        await svc.store.close()


async def test_the_python_pages_ask_and_guard_run_as_written(tmp_path: Path) -> None:
    handle = _defined(_block("async def handle("), "handle")
    svc = ApprovalService.from_config(
        parse_config(CONFIG), store=open_store(f"sqlite:///{tmp_path / 'h.db'}"), clock=SystemClock()
    )
    try:  # the refund approved; the e-mail a tool the policy lets run
        answered = asyncio.ensure_future(handle(svc, "run-42", "Box arrived crushed, mail me at jane@example.com"))
        a = await _pending(svc)
        assert a.session_id == "run-42" and "[email]" in a.evidence and "jane@" not in a.evidence
        await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE))
        assert await answered == "refunded, e-mail sent: True"
    finally:
        await svc.store.close()
    svc = ApprovalService.from_config(
        parse_config(BOTH_ASKED), store=open_store(f"sqlite:///{tmp_path / 'asked.db'}"), clock=SystemClock()
    )
    try:  # the e-mail needs a person too, who says no: the guard raises, the handler says why
        answered = asyncio.ensure_future(handle(svc, "run-43", "Box arrived crushed"))
        await svc.decide(DecideRequest((await _pending(svc)).id, "U_SUPPORT1", DecisionKind.APPROVE))
        mail = await eventually(lambda: _waiting_on(svc, "send_email"), what="the e-mail's approval")
        await svc.decide(DecideRequest(mail, "U_SUPPORT2", DecisionKind.REJECT, reason="tone is wrong"))
        told = await answered
        assert told.startswith("refunded, e-mail not sent: send_email was not approved") and "tone is wrong" in told
    finally:
        await svc.store.close()


async def _waiting_on(svc: ApprovalService, tool: str) -> str | None:
    items = (await svc.store.approvals.list_pending(limit=5)).items
    return next((a.id for a in items if a.tool == tool), None)
