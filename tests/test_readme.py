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
