"""`hitl pending` is a compact list (issue 63): a count, then at most two lines per approval, whole or cut at the
terminal's edge, at 80 and 120 columns, with the sentence (amount included), the tier, the time left said once and
the id to act on; one about to expire comes first, whatever its tier; a value that could fool the eye is marked in
the list and in `hitl show`. Real `python -m hitl` processes against a real SQLite store; `--json` is pinned
elsewhere (tests/cli/test_refund_cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.cli_process import store_env

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "examples" / "refund" / "workflow.yaml"
CONFIG = str(REFUND.parent / "hitl.yaml")
NOW = 1_800_000_000
TIMEOUT = 4 * 3600  # the refund tool's timeout in the example's hitl.yaml


def hitl(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m hitl ...` as an operator runs it, on this test's store and shop."""
    full = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        **store_env(tmp_path, HITL_API_URL="", HITL_TOKEN="", COLUMNS="200"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "hitl", *args], env=full, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def refund(tmp_path: Path, amount: str, session: str, at: int, order: str = "78291") -> str:
    """Ask for a refund of ``amount`` on ``order`` at ``at``; the approval it waits on."""
    r = hitl(tmp_path, "run", str(REFUND), "--var", f"order_id={order}", "--var", f"amount={amount}", "--session",
             session, "--json", HITL_NOW=str(at))  # fmt: skip
    assert r.returncode == 4, (r.stdout, r.stderr)
    return str(json.loads(r.stdout)["approval_id"])


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A store with one refund (approve tier) asked 3 h 59 min ago, then two escalated ones (over 500)."""
    tmp_path = tmp_path_factory.mktemp("queue")
    urgent = refund(tmp_path, "120", "ses_urgent", NOW - TIMEOUT + 60)  # 1 min left at NOW
    over = refund(tmp_path, "600", "ses_over", NOW - 2)
    far = refund(tmp_path, "1250", "ses_far", NOW - 1)
    return tmp_path, [urgent, far, over]


def test_one_about_to_expire_ranks_first_and_says_why(queue: tuple[Path, list[str]]) -> None:
    tmp_path, (urgent, far, over) = queue
    listed = json.loads(hitl(tmp_path, "pending", "--json", "--config", CONFIG, HITL_NOW=str(NOW)).stdout)
    assert [a["id"] for a in listed["pending"]] == [urgent, far, over]  # the store's rank puts it last: tier first
    assert listed["pending"][0]["ranked"] == "due soon, so first: 1 min left · approve"
    assert listed["pending"][1]["ranked"].startswith("escalated · ") and "3 h left" in listed["pending"][1]["ranked"]


@pytest.mark.parametrize("width", [80, 120])
def test_pending_is_a_compact_list_at_any_width(queue: tuple[Path, list[str]], width: int) -> None:
    tmp_path, (urgent, far, over) = queue
    r = hitl(tmp_path, "pending", "--config", CONFIG, HITL_NOW=str(NOW), COLUMNS=str(width))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    assert lines[0] == "3 pending approvals · the most important first"  # the count first
    assert "hitl resume ID --approve" in lines[1]  # how to act, said once above the list
    starts = [i for i, line in enumerate(lines) if line.split(" ")[0] in (urgent, far, over)]
    assert [lines[i].split(" ")[0] for i in starts] == [urgent, far, over]
    assert starts == [2, 4, 6] and len(lines) == 8  # a header, then two lines per approval: no 7-line blocks
    for i, amount in zip(starts, ("USD 120.00", "USD 1,250.00", "USD 600.00"), strict=True):
        head, detail = lines[i], lines[i + 1]
        assert detail.startswith("    ") and detail.count(" left") == 1 and "expires" not in detail  # said once
        if width == 120:  # the sentence, amount included; the order id is declared `type: string`: no mark
            assert f"  Refund {amount} to " in head and "for order “78291”" in head and "!" not in head, head
    assert "due soon, so first: 1 min left · approve" in lines[3]
    assert lines[5].startswith("    escalated · ") and lines[7].startswith("    escalated · ")
    assert "look closely" not in "\n".join(lines)


def test_show_leaves_a_declared_string_that_reads_as_a_number_unmarked(queue: tuple[Path, list[str]]) -> None:
    # hitl.yaml declares order_id `type: string`: "78291" is text by contract, and a mark on every order number
    # would teach reviewers to ignore the mark (tests/domain/test_display.py marks an undeclared one).
    tmp_path, (urgent, _, _) = queue
    out = hitl(tmp_path, "show", urgent, HITL_NOW=str(NOW)).stdout
    about = next(line for line in out.splitlines() if line.startswith("about"))
    assert about.split(None, 1)[1].startswith("Approval needed: Refund USD 120.00")
    assert "look closely" not in out and "only its quotes tell it from" not in out


def test_one_due_soon_comes_first_though_the_store_ranks_it_past_the_first_page(
    queue: tuple[Path, list[str]], tmp_path: Path
) -> None:
    # Asked first (the module's queue) or asked last (a store of its own), with 1 min left at NOW: the store ranks
    # it after the escalations, past `--limit 2`'s page; it still leads the list, and says why.
    first_path, (urgent, far, _) = queue
    last = [refund(tmp_path, amount, f"ses_{amount}", NOW - 3 + i) for i, amount in enumerate(("600", "1250", "900"))]
    late = refund(tmp_path, "60", "ses_late", NOW - TIMEOUT + 60, order="78300")  # another customer: no sum to escalate
    for path, expected in ((first_path, [urgent, far]), (tmp_path, [late, last[1]])):
        r = hitl(path, "pending", "--json", "--limit", "2", "--config", CONFIG, HITL_NOW=str(NOW))
        listed = json.loads(r.stdout)["pending"]
        assert [a["id"] for a in listed] == expected, r.stderr
        assert listed[0]["ranked"] == "due soon, so first: 1 min left · approve"
        assert listed[1]["ranked"].startswith("escalated · 2.5× its rule's limit")
        shown = hitl(path, "pending", "--limit", "2", "--config", CONFIG, HITL_NOW=str(NOW)).stdout.splitlines()
        assert shown[2].split(" ")[0] == expected[0] and "due soon, so first: 1 min left" in shown[3]
