"""The README's Python example runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_api_example_runs(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "asyncio.run(main())" in b)
    script = tmp_path / "example.py"
    script.write_text(block)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert "self_approval" in out.stdout and "approved 2" in out.stdout
    assert "[email]" in out.stdout and "jane@example.com" not in out.stdout
    assert "decided U_SUPPORT1 ok" in out.stdout


def test_readme_agent_examples_run(tmp_path: Path) -> None:
    """Every framework example the README lists runs offline and runs the reviewer's edit, once."""
    text = (ROOT / "README.md").read_text()
    commands = re.findall(r"^python (examples/agents/\w+\.py)$", text, re.M)
    assert sorted(commands) == [
        "examples/agents/langgraph_refund.py",
        "examples/agents/openai_agents_refund.py",
        "examples/agents/pydantic_ai_refund.py",
        "examples/agents/strands_refund.py",
    ]
    for script in commands:
        out = subprocess.run(
            [sys.executable, str(ROOT / script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert out.returncode == 0, (script, out.stderr)
        assert out.stdout.count("effect: refunded") == 1, (script, out.stdout)
        assert "effect: refunded 60 on order 78291" in out.stdout, (script, out.stdout)
        assert "model: refunded 60 on order 78291" in out.stdout, (script, out.stdout)
